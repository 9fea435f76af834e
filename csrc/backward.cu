// The exact fp32 backward of the blend, shared by every blend variant: each pixel walks its
// tile's list back to front from its last contributor (backward.cuh). A warp handles one
// Gaussian at a time, so its gradient is summed across the warp (a reduce-scatter: 8 lanes
// end with one value each) before one atomic add per value.
// CULL (backward=exact_cull): the same sums over warps of 8x4 pixels instead of 16x2 rows, each
// warp skipping the entries whose ellipse cannot reach its pixels and those behind its last
// contributor. Squarer warps meet fewer Gaussians: on biker at 1080p the warps that must sum an
// entry drop from 48 % to 36 %, and half of all warp x entry steps are skipped
// (experiments/tensor_core_backward/warp_cull.py).
#include "backward.cuh"

namespace {

constexpr int NUM_GRADS = 9;  // means2d (2), conic (3), opacity, colour (3)

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One reduce-scatter step over lane bit `H` (16, 8, 4): of the lane pair (l, l ^ H), the lane
// with the bit clear keeps the first half of its values and the other lane the second half;
// each adds its partner's copy of the half it keeps. N shuffles sum 2N values over the pair.
template <int N>
__device__ inline void halve(float (&v)[2 * N], int lane, int H) {
  const bool upper = lane & H;
  for (int k = 0; k < N; ++k) {
    const float send = upper ? v[k] : v[N + k];
    const float keep = upper ? v[N + k] : v[k];
    v[k] = keep + __shfl_xor_sync(0xffffffffu, send, H);
  }
}

// Sums 8 values over the warp in 9 shuffles (40 as 8 butterflies): after three halvings lane l
// holds value l >> 2 summed over the 8 lanes that share its low two bits; two more shuffles
// add those 4 groups, so every lane l ends with the warp's total of value l >> 2.
__device__ inline float warp_sum8(float (&v)[8], int lane) {
  halve<4>(v, lane, 16);
  halve<2>(reinterpret_cast<float(&)[4]>(v), lane, 8);
  halve<1>(reinterpret_cast<float(&)[2]>(v), lane, 4);
  float s = v[0];
  s += __shfl_xor_sync(0xffffffffu, s, 2);
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  return s;
}

// Where value k of a Gaussian's gradient goes: means2d (2), conic (3), opacity, colour (3), as
// base + stride * id; found once per thread, so the loop's atomics need no branch.
struct Slot {
  float* base;
  int stride;
};

__device__ inline Slot grad_slot(const BlendBackwardArgs& args, int k) {
  if (k < 2) return {args.grad_means2d + k, 2};
  if (k < 5) return {args.grad_conic + (k - 2), 3};
  if (k == 5) return {args.grad_opacity, 1};
  return {args.grad_colors + (k - 6), 3};
}

// CULL's pixels: warp w holds the tile's 8x4 block (w % 2, w / 2), lane l its pixel (l % 8, l / 8).
constexpr int WARP_W = 8, WARP_H = 4;
static_assert(TILE_SIZE == 2 * WARP_W && BLOCK_PIXELS == 8 * 32, "eight 8x4 warps per 16x16 tile");

__device__ inline void warp_block_pixel(TilePixel& p, int tiles_x, int width, int height) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  p.x = (p.tile % tiles_x) * TILE_SIZE + (w % 2) * WARP_W + l % WARP_W;
  p.y = (p.tile / tiles_x) * TILE_SIZE + (w / 2) * WARP_H + l / WARP_W;
  p.inside = p.x < width && p.y < height;
}

// A bit per warp of the tile at (x0, y0): the warps whose 8x4 pixels the entry's alpha = 1/255
// ellipse may reach, from the ellipse's box grown by 1 % and 0.05 px. In fp32 (double would
// cost the kernel registers, and occupancy): the box's half-widths sqrt(t cov_xx) have a relative
// error under 1e-4 while the conic's determinant keeps 1e-3 of a c; a thinner ellipse is not
// culled. So a pixel outside the box has alpha < 1/255, which the walk skips anyway.
__device__ inline unsigned reach_mask(float2 xy, float4 co, int x0, int y0) {
  if (!(co.w >= ALPHA_MIN)) return co.w < ALPHA_MIN ? 0u : 0xffu;  // never visible; NaN: no skip
  const float ac = co.x * co.z, det = ac - co.y * co.y;
  if (!(det >= 1e-3f * ac)) return 0xffu;
  const float t = 2.f * __logf(255.f * co.w) / det;  // level / det; cov_xx = c / det, cov_yy = a / det
  const float ex = sqrtf(fmaxf(t * co.z, 0.f)) * 1.01f + 0.05f, ey = sqrtf(fmaxf(t * co.x, 0.f)) * 1.01f + 0.05f;
  unsigned cols = 0, rows = 0;
  for (int c = 0; c < 2; ++c) {
    const float lo = (float)(x0 + c * WARP_W), hi = lo + (WARP_W - 1);
    cols |= (lo <= xy.x + ex && hi >= xy.x - ex) << c;
  }
  for (int r = 0; r < 4; ++r) {
    const float lo = (float)(y0 + r * WARP_H), hi = lo + (WARP_H - 1);
    rows |= (lo <= xy.y + ey && hi >= xy.y - ey) << r;
  }
  unsigned mask = 0;
  for (int w = 0; w < 8; ++w) mask |= ((cols >> (w % 2)) & (rows >> (w / 2)) & 1u) << w;
  return mask;
}

// ABS: also add each pixel's |d/d means2d| to args.grad_means2d_abs (absgrad); DEPTH: the depth
// channel too, its dL/dz summed into args.grad_depths. Template arguments, so the kernel
// without them is the one it always was.
template <int PROBE, bool ABS, bool DEPTH, bool CULL>
// CULL's kernel is held to 48 registers (5 blocks an SM, as the plain one): unbounded, ptxas takes
// 58-62 and fits 4. What it spills is written once and read once a batch, outside the walk.
__global__ void __launch_bounds__(BLOCK_PIXELS, CULL ? 5 : 0) blend_backward_kernel(BlendBackwardArgs args) {
  constexpr int NC = BLEND_CHANNELS<DEPTH>;
  __shared__ Batch<NC> s;
  __shared__ int s_max_last;
  __shared__ unsigned char s_reach[CULL ? BLOCK_PIXELS : 1];  // CULL: reach_mask of each entry

  TilePixel tp = tile_pixel(args.ranges, args.tile_order, args.tiles_x, args.width, args.height);
  if constexpr (CULL) warp_block_pixel(tp, args.tiles_x, args.width, args.height);
  const float fx = (float)tp.x, fy = (float)tp.y;
  const int2 range = tp.range;
  const PixelGrad<NC> p = pixel_grad<NC>(args, tp.inside, tp.y * args.width + tp.x);
  const int end = range.x + block_max_last(p.last, s_max_last);
  Walk<NC> w{p.T_final};
  const int lane = threadIdx.x % 32;
  const Slot slot = grad_slot(args, lane >> 2);
  const int warp = threadIdx.x / 32;
  const int warp_last = CULL ? __reduce_max_sync(0xffffffffu, p.last) : 0;
  const int tile_x0 = (tp.tile % args.tiles_x) * TILE_SIZE, tile_y0 = (tp.tile / args.tiles_x) * TILE_SIZE;
  float kept = 0.f;  // PROBE_WALK: the pair values, summed per thread

  for (int top = end; top > range.x; top -= BLOCK_PIXELS) {
    __syncthreads();
    load_batch(s, args, top, range.x);
    if constexpr (CULL) {
      if (top - 1 - (int)threadIdx.x >= range.x)
        s_reach[threadIdx.x] = reach_mask(s.xy[threadIdx.x], s.co[threadIdx.x], tile_x0, tile_y0);
    }
    __syncthreads();
    int count = min(BLOCK_PIXELS, top - range.x);
    // CULL: positions past the warp's last contributor come first (back to front); none contributes
    for (int j = CULL ? max(0, top - range.x - warp_last) : 0; j < count; ++j) {
      if constexpr (CULL) {
        if (!((s_reach[j] >> warp) & 1u)) continue;  // the same for the whole warp
      }
      const int position = top - j - range.x;  // 1-based
      float g[NUM_GRADS] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      float g_z = 0.f;  // DEPTH: dL/dz
      Entry e;
      const bool contributes = position <= p.last && unblend(w, p, s, j, fx, fy, e);
      if (contributes) {
        const float weight = e.alpha * w.T;
        for (int ch = 0; ch < 3; ++ch) g[6 + ch] = weight * p.dC[ch];
        if constexpr (DEPTH) g_z = weight * p.dC[3];
        if (e.raw <= ALPHA_MAX) {  // the 0.99 clamp passes no gradient to o or power
          const float4 co = s.co[j];
          float d_power = e.d_alpha * e.raw;
          g[5] = e.d_alpha * e.G;
          g[0] = -d_power * (co.x * e.dx + co.y * e.dy);
          g[1] = -d_power * (co.z * e.dy + co.y * e.dx);
          g[2] = -0.5f * d_power * e.dx * e.dx;
          g[3] = -d_power * e.dx * e.dy;
          g[4] = -0.5f * d_power * e.dy * e.dy;
        }
      }
      if (!__any_sync(0xffffffffu, contributes)) continue;
      if constexpr (PROBE == PROBE_WALK) {
        for (int k = 0; k < NUM_GRADS; ++k) kept += g[k];
        continue;
      }
      const int id = s.id[j];
      if constexpr (ABS) {  // before warp_sum8, which overwrites g
        const float abs_x = warp_sum(fabsf(g[0])), abs_y = warp_sum(fabsf(g[1]));
        if (lane == 0) {
          atomicAdd(&args.grad_means2d_abs[2 * id], abs_x);
          atomicAdd(&args.grad_means2d_abs[2 * id + 1], abs_y);
        }
      }
      if constexpr (DEPTH) {  // lane 1: free of the other atomics
        const float z = warp_sum(g_z);
        if (lane == 1) grad_add<PROBE>(&args.grad_depths[id], z, kept);
      }
      const float blue = warp_sum(g[8]);
      const float sum = warp_sum8(reinterpret_cast<float(&)[8]>(g), lane);
      if ((lane & 3) == 0) grad_add<PROBE>(slot.base + slot.stride * id, sum, kept);
      if (lane == 0) grad_add<PROBE>(&args.grad_colors[3 * id + 2], blue, kept);
    }
  }
  if constexpr (PROBE != PROBE_NONE) keep(kept, args.grad_opacity);
}

template <bool CULL>
void launch(const BlendBackwardArgs& args, int tiles, int probe, cudaStream_t stream) {
  // The probes time the kernel without depth (their gradients are wrong anyway).
  const bool abs = args.grad_means2d_abs, depth = args.grad_depths;
  if (probe == PROBE_WALK)
    blend_backward_kernel<PROBE_WALK, false, false, CULL><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (probe == PROBE_NO_ATOMICS)
    blend_backward_kernel<PROBE_NO_ATOMICS, false, false, CULL><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (abs && depth)
    blend_backward_kernel<PROBE_NONE, true, true, CULL><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (abs)
    blend_backward_kernel<PROBE_NONE, true, false, CULL><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (depth)
    blend_backward_kernel<PROBE_NONE, false, true, CULL><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else
    blend_backward_kernel<PROBE_NONE, false, false, CULL><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
}

}  // namespace

void launch_blend_backward(const BlendBackwardArgs& args, bool cull, int probe, cudaStream_t stream) {
  int tiles = args.tiles_x * args.tiles_y;
  if (tiles == 0) return;
  if (cull)
    launch<true>(args, tiles, probe, stream);
  else
    launch<false>(args, tiles, probe, stream);
}
