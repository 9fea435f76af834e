// Host build of csrc/preprocess.cu's kernels for tests/test_preprocess_host.py: each block's
// threads run as std::threads that meet at a std::barrier, so __syncthreads behaves as on a GPU;
// the intrinsics are their IEEE host operations.
// `preprocess_host IN OUT`: IN holds a scene and the blend's gradients (the test writes it); at
// every SH degree (16 bases stored) and in both SH layouts, then antialiased at degrees 1 and 3
// (one layout each), then with Mip-Splatting's 0.1 px^2 dilation (with and without antialiased), it runs the forward and the backward (with the depth gradient dL/dz in the
// joined layout, the backward's DEPTH kernel, and without it in the split one),
// prints one line per case and appends the outputs and gradients to OUT for the test's comparison
// with the torch reference. Both kernels' outputs start as NaN (they must write every value) and
// shared memory is NaN before each block (a read of something never staged shows).
#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
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
void __syncthreads() { block_barrier->arrive_and_wait(); }
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
  Camera cam;
  std::vector<float> means, log_scales, quats, logits, sh;  // sh: [n, 16, 3]
  std::vector<float> g_means2d, g_conic, g_colors, g_opacity, g_depths;  // from the blend backward
};

template <typename T>
void read(FILE* f, std::vector<T>& v, size_t count) {
  v.resize(count);
  if (std::fread(v.data(), sizeof(T), count, f) != count) throw std::runtime_error("input too short");
}

// int32 n; 23 float32 camera values (csrc/ext.cpp make_camera's order); then float32 arrays.
Scene read_scene(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (!f) throw std::runtime_error("cannot open the input");
  Scene s;
  std::vector<int> n;
  std::vector<float> c;
  read(f, n, 1);
  read(f, c, 23);
  s.n = n[0];
  Camera& cam = s.cam;
  for (int i = 0; i < 12; ++i) cam.view[i] = c[i];
  cam.fx = c[12], cam.fy = c[13], cam.cx = c[14], cam.cy = c[15], cam.tan_x = c[16], cam.tan_y = c[17];
  for (int i = 0; i < 3; ++i) cam.cam_pos[i] = c[18 + i];
  cam.width = (int)c[21], cam.height = (int)c[22];
  cam.tiles_x = (cam.width + TILE_SIZE - 1) / TILE_SIZE, cam.tiles_y = (cam.height + TILE_SIZE - 1) / TILE_SIZE;
  const size_t N = s.n;
  read(f, s.means, 3 * N), read(f, s.log_scales, 3 * N), read(f, s.quats, 4 * N), read(f, s.logits, N);
  read(f, s.sh, 48 * N);
  read(f, s.g_means2d, 2 * N), read(f, s.g_conic, 3 * N), read(f, s.g_colors, 3 * N), read(f, s.g_opacity, N);
  read(f, s.g_depths, N);
  std::fclose(f);
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

// Filled with `fill`, or with the scene's coefficients when given them ([n, 16, 3]).
Sh make_sh(int n, bool joined, float fill, const std::vector<float>* joined_values) {
  Sh s{std::vector<float>(joined ? 48 * n : 3 * n, fill), std::vector<float>(joined ? 0 : 45 * n, fill), joined};
  if (joined_values) {
    if (joined) s.dc = *joined_values;
    else
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < 48; ++j) (j < 3 ? s.dc[3 * i + j] : s.rest[45 * i + j - 3]) = (*joined_values)[48 * i + j];
  }
  return s;
}

// As [n, 16, 3], whatever the layout.
std::vector<float> joined_values(const Sh& s, int n) {
  if (s.joined) return s.dc;
  std::vector<float> out(48 * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 48; ++j) out[48 * i + j] = j < 3 ? s.dc[3 * i + j] : s.rest[45 * i + j - 3];
  return out;
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
  Grads(int n, bool joined, const std::vector<float>& g_opacity)  // NaN but the blend's opacity gradient
      : means(3 * n, NaN), log_scales(3 * n, NaN), quats(4 * n, NaN), opacity(g_opacity), sh(make_sh(n, joined, NaN, nullptr)) {}
};

template <typename T>
void dump(FILE* f, const std::vector<T>& v) { std::fwrite(v.data(), sizeof(T), v.size(), f); }

template <int D>
void run_case(const Scene& s, bool joined, Filter2D filter, FILE* out) {
  const int n = s.n;
  Sh sh = make_sh(n, joined, 0.f, &s.sh);
  const ShView<const float> shv = sh.view<const float>(sh.dc.data(), sh.rest.data());
  Forward f(n);
  launch(n, BLOCK, preprocess_kernel<D>, n, s.means.data(), s.log_scales.data(), s.quats.data(), s.logits.data(), shv,
         s.cam, (int)INTERSECT_ACCUTILE, filter, f.out());
  Grads g(n, joined, s.g_opacity);  // ext.cpp clears only the blend's gradients
  const bool depth = joined;
  launch(n, BACKWARD_BLOCK, depth ? preprocess_backward_kernel<D, true> : preprocess_backward_kernel<D, false>, n,
         s.means.data(), s.log_scales.data(), s.quats.data(), s.logits.data(), shv, s.cam, filter,
         (const int*)f.radii.data(), s.g_means2d.data(), s.g_conic.data(), s.g_colors.data(), g.means.data(),
         g.log_scales.data(), g.quats.data(), g.opacity.data(), g.sh.view<float>(g.sh.dc.data(), g.sh.rest.data()),
         depth ? (const float*)s.g_depths.data() : nullptr);
  int visible = 0;
  for (int i = 0; i < n; ++i) visible += f.radii[i] > 0;
  dump(out, f.means2d), dump(out, f.conic), dump(out, f.colors), dump(out, f.depths), dump(out, f.radii);
  dump(out, f.touched), dump(out, g.means), dump(out, g.log_scales), dump(out, g.quats), dump(out, g.opacity);
  dump(out, joined_values(g.sh, n));
  std::printf("degree %d %s%s dilation %.2f: visible %d of %d\n", D, joined ? "joined" : "split",
              filter.antialiased ? " antialiased" : "", filter.dilation, visible, n);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: preprocess_host IN OUT\n");
    return 2;
  }
  const Scene s = read_scene(argv[1]);
  FILE* out = std::fopen(argv[2], "wb");
  const Filter2D plain{}, aa{COV2D_DILATION, true};
  for (bool joined : {false, true}) {
    run_case<0>(s, joined, plain, out);
    run_case<1>(s, joined, plain, out);
    run_case<2>(s, joined, plain, out);
    run_case<3>(s, joined, plain, out);
  }
  run_case<1>(s, false, aa, out);
  run_case<3>(s, true, aa, out);
  run_case<2>(s, false, {0.1f, false}, out);
  run_case<3>(s, true, {0.1f, true}, out);
  std::fclose(out);
  return 0;
}
