// Host build of csrc/preprocess.cu's kernels for tests/test_preprocess_host.py: each block's
// threads run as std::threads that meet at a std::barrier, so __syncthreads and
// __syncthreads_count behave as on a GPU; the intrinsics are their IEEE host operations. It
// checks the staged kernels (SH rows through shared memory) against the unstaged ones, bit for
// bit, on a scene of whole culled blocks, blocks with one Gaussian in eight on screen and mostly
// visible blocks, at every SH degree with 16 bases stored, in both SH layouts. The staged
// backward's outputs start as NaN (it must write every value) and shared memory is NaN before
// each block (a read of something never staged shows). Prints one line per case.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fdiv_rn(float a, float b) { return a / b; }
using std::max;
using std::min;

// One block runs at a time: these are its coordinates, its barrier and its shared memory.
thread_local uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
std::barrier<>* block_barrier;
std::atomic<int> votes{0};
void __syncthreads() { block_barrier->arrive_and_wait(); }
int __syncthreads_count(int predicate) {
  if (predicate) ++votes;
  __syncthreads();
  const int count = votes.load();
  __syncthreads();
  if (threadIdx.x == 0) votes = 0;
  __syncthreads();
  return count;
}
namespace {
constexpr int SMEM_FLOATS = 48 * 1024 / 4;
float smem[SMEM_FLOATS];  // the kernels' `extern __shared__ float smem[]`
}  // namespace

#define GSEXP_HOST_KERNELS
#include "preprocess.cu"

const float NaN = std::numeric_limits<float>::quiet_NaN();

template <typename Kernel, typename... Args>
void launch(int n, int threads, Kernel kernel, Args... args) {
  blockDim = dim3(threads);
  for (int b = 0; b * threads < n; ++b) {
    blockIdx = {(unsigned)b, 0, 0};
    std::fill(smem, smem + SMEM_FLOATS, NaN);
    std::barrier<> bar(threads);
    block_barrier = &bar;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadIdx = {(unsigned)t, 0, 0};
        kernel(args...);
        bar.arrive_and_drop();  // an exited thread no longer holds up the block's barriers
      });
    for (auto& th : pool) th.join();
  }
}

struct Scene {
  int n;
  std::vector<float> means, log_scales, quats, logits;
  Camera cam;
};

// Random Gaussians around the origin seen by a camera at distance ~3.2; runs of them moved behind
// the camera: every 7th, all of [1024, 3072) (whole blocks of 128), and 7 in 8 of [4096, 6144).
Scene make_scene(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::normal_distribution<float> normal(0.f, 1.f);
  Scene s{n};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) s.means.push_back(2 * u(rng) - 1);
    for (int j = 0; j < 3; ++j) s.log_scales.push_back(2 * u(rng) - 4);
    for (int j = 0; j < 4; ++j) s.quats.push_back(normal(rng));
    s.logits.push_back(2 * normal(rng));
  }
  const float eye[3] = {3.f * std::cos(1.f), 3.f * std::sin(1.f), 1.f};
  for (int i = 0; i < n; ++i) {
    const bool behind = i % 7 == 0 || (i >= 1024 && i < 3072) || (i >= 4096 && i < 6144 && i % 8 != 0);
    if (behind)
      for (int j = 0; j < 3; ++j) s.means[3 * i + j] = 2 * eye[j];
  }
  // look at the origin, z up: camera rows right, down, forward (x right, y down, z ahead)
  float f[3] = {-eye[0], -eye[1], -eye[2]};
  const float fl = std::sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]);
  for (float& v : f) v /= fl;
  float r[3] = {f[1], -f[0], 0.f};  // f x (0, 0, 1)
  const float rl = std::sqrt(r[0] * r[0] + r[1] * r[1]);
  for (float& v : r) v /= rl;
  const float d[3] = {f[1] * r[2] - f[2] * r[1], f[2] * r[0] - f[0] * r[2], f[0] * r[1] - f[1] * r[0]};
  const float* rows[3] = {r, d, f};
  Camera& c = s.cam;
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 3; ++j) c.view[4 * k + j] = rows[k][j];
    c.view[4 * k + 3] = -(rows[k][0] * eye[0] + rows[k][1] * eye[1] + rows[k][2] * eye[2]);
  }
  c.width = 400, c.height = 300;
  c.fx = c.fy = 0.9f * c.width;
  c.cx = c.width / 2.f, c.cy = c.height / 2.f;
  c.tan_x = c.width / (2 * c.fx), c.tan_y = c.height / (2 * c.fy);
  for (int j = 0; j < 3; ++j) c.cam_pos[j] = eye[j];
  c.tiles_x = (c.width + TILE_SIZE - 1) / TILE_SIZE, c.tiles_y = (c.height + TILE_SIZE - 1) / TILE_SIZE;
  return s;
}

// 16 SH bases per Gaussian, as one [n, 16, 3] array (joined) or DC [n, 1, 3] + rest [n, 15, 3].
struct Sh {
  std::vector<float> dc, rest;
  bool joined;
  template <typename T>
  ShView<T> view(T* d, T* r) const {
    return joined ? ShView<T>{d, d + 3, 48, 48, 45} : ShView<T>{d, r, 3, 45, 45};
  }
};

Sh make_sh(int n, bool joined, float fill, std::mt19937* rng) {
  std::normal_distribution<float> normal(0.f, 0.5f);
  Sh s{std::vector<float>(joined ? 48 * n : 3 * n, fill), std::vector<float>(joined ? 0 : 45 * n, fill), joined};
  if (rng) {
    for (float& v : s.dc) v = normal(*rng);
    for (float& v : s.rest) v = normal(*rng);
  }
  return s;
}

struct Forward {
  std::vector<float> means2d, conic, colors, depths;
  std::vector<int> radii, touched;
  explicit Forward(int n) : means2d(2 * n, NaN), conic(4 * n, NaN), colors(3 * n, NaN), depths(n, NaN), radii(n, -1), touched(n, -1) {}
  PreprocessOut out() { return {means2d.data(), conic.data(), colors.data(), depths.data(), radii.data(), touched.data()}; }
};

struct Grads {
  std::vector<float> means, log_scales, quats, opacity;
  Sh sh;
  Grads(int n, bool joined, float fill, const std::vector<float>& g_opacity)
      : means(3 * n, fill), log_scales(3 * n, fill), quats(4 * n, fill), opacity(g_opacity), sh(make_sh(n, joined, fill, nullptr)) {}
};

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <int D>
int run_case(const Scene& s, bool joined) {
  const int n = s.n;
  std::mt19937 rng(7 + D + 10 * joined);
  Sh sh = make_sh(n, joined, 0.f, &rng);
  const ShView<const float> shv = sh.view<const float>(sh.dc.data(), sh.rest.data());

  Forward plain(n), staged(n);
  launch(n, BLOCK, preprocess_kernel<D, false>, n, s.means.data(), s.log_scales.data(), s.quats.data(), s.logits.data(),
         shv, s.cam, (int)INTERSECT_ACCUTILE, plain.out());
  launch(n, STAGE_BLOCK, preprocess_kernel<D, true>, n, s.means.data(), s.log_scales.data(), s.quats.data(),
         s.logits.data(), shv, s.cam, (int)INTERSECT_ACCUTILE, staged.out());
  const bool fwd = same_bits(plain.means2d, staged.means2d) && same_bits(plain.conic, staged.conic) &&
                   same_bits(plain.colors, staged.colors) && same_bits(plain.depths, staged.depths) &&
                   same_bits(plain.radii, staged.radii) && same_bits(plain.touched, staged.touched);

  // the blend backward's gradients: random where visible, zero elsewhere (it touches only those)
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> g_means2d(2 * n), g_conic(3 * n), g_colors(3 * n), g_opacity(n, 0.f);
  int visible = 0, staged_blocks = 0, direct_visible = 0;
  for (int i = 0; i < n; ++i) {
    if (plain.radii[i] <= 0) continue;
    ++visible;
    for (int j = 0; j < 2; ++j) g_means2d[2 * i + j] = normal(rng);
    for (int j = 0; j < 3; ++j) g_conic[3 * i + j] = normal(rng), g_colors[3 * i + j] = normal(rng);
    g_opacity[i] = normal(rng);
  }
  for (int b = 0; b * STAGE_BLOCK < n; ++b) {  // which forward blocks staged, as the kernel decides
    const int rows = std::min(STAGE_BLOCK, n - b * STAGE_BLOCK);
    int on = 0;
    for (int i = b * STAGE_BLOCK; i < b * STAGE_BLOCK + rows; ++i) on += plain.touched[i] > 0;
    if (on * 4 >= rows) ++staged_blocks;
    else direct_visible += on;
  }
  Grads gp(n, joined, 0.f, g_opacity), gs(n, joined, NaN, g_opacity);  // ext.cpp: zeros, or nothing
  auto backward = [&](auto kernel, int threads, Grads& g) {
    launch(n, threads, kernel, n, s.means.data(), s.log_scales.data(), s.quats.data(), s.logits.data(), shv, s.cam,
           (const int*)plain.radii.data(), (const float*)g_means2d.data(), (const float*)g_conic.data(),
           (const float*)g_colors.data(), g.means.data(), g.log_scales.data(), g.quats.data(), g.opacity.data(),
           g.sh.view<float>(g.sh.dc.data(), g.sh.rest.data()));
  };
  backward(preprocess_backward_kernel<D, false>, BLOCK, gp);
  backward(preprocess_backward_kernel<D, true>, STAGE_BLOCK, gs);
  const bool bwd = same_bits(gp.means, gs.means) && same_bits(gp.log_scales, gs.log_scales) &&
                   same_bits(gp.quats, gs.quats) && same_bits(gp.opacity, gs.opacity) &&
                   same_bits(gp.sh.dc, gs.sh.dc) && same_bits(gp.sh.rest, gs.sh.rest);
  // the unstaged gradients are not all zero where the degree reaches (else equal proves little)
  double used_sum = 0;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < (D + 1) * (D + 1); ++k)
      for (int c = 0; c < 3; ++c) used_sum += std::fabs(gp.sh.view<float>(gp.sh.dc.data(), gp.sh.rest.data()).at(i, k, c));
  std::printf("degree %d %s: forward_equal %d backward_equal %d visible %d of %d staged_blocks %d "
              "direct_visible %d sh_grad_abs %.3f\n", D, joined ? "joined" : "split", fwd, bwd, visible, n,
              staged_blocks, direct_visible, used_sum);
  return fwd && bwd ? 0 : 1;
}

int main() {
  const Scene s = make_scene(8000, 1);
  int failures = 0;
  for (bool joined : {false, true}) {
    failures += run_case<0>(s, joined);
    failures += run_case<1>(s, joined);
    failures += run_case<2>(s, joined);
    failures += run_case<3>(s, joined);
  }
  return failures;
}
