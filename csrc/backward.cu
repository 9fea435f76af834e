// The exact fp32 backward of the blend, shared by every blend variant: each pixel walks its
// tile's list back to front from its last contributor (backward.cuh). A warp handles one
// Gaussian at a time, so its gradient is summed across the warp (a reduce-scatter: 8 lanes
// end with one value each) before one atomic add per value.
#include "backward.cuh"
#include "warp.cuh"

namespace {

constexpr int NUM_GRADS = 9;  // means2d (2), conic (3), opacity, colour (3)

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

// ABS: also add each pixel's |d/d means2d| to args.grad_means2d_abs (absgrad); DEPTH: the depth
// channel too, its dL/dz summed into args.grad_depths. Template arguments, so the kernel
// without them is the one it always was. SUB = 2: four blocks share a tile, each four of its
// rows, each walking the whole list for its pixels (the same sums: each warp adds its own share).
template <int PROBE, bool ABS, bool DEPTH, int SUB = 1>
__global__ void __launch_bounds__(BLOCK_PIXELS / (SUB * SUB)) blend_backward_kernel(BlendBackwardArgs args) {
  constexpr int NC = BLEND_CHANNELS<DEPTH>;
  constexpr int THREADS = BLOCK_PIXELS / (SUB * SUB);
  __shared__ Batch<NC, THREADS> s;
  __shared__ int s_max_last;

  const TilePixel tp = tile_pixel<SUB>(args.ranges, args.tile_order, args.tiles_x, args.width, args.height);
  const float fx = (float)tp.x, fy = (float)tp.y;
  const int2 range = tp.range;
  const PixelGrad<NC> p = pixel_grad<NC>(args, tp.inside, tp.y * args.width + tp.x);
  const int end = range.x + block_max_last(p.last, s_max_last);
  Walk<NC> w{p.T_final};
  const int lane = threadIdx.x % 32;
  const Slot slot = grad_slot(args, lane >> 2);
  float kept = 0.f;  // PROBE_WALK: the pair values, summed per thread

  for (int top = end; top > range.x; top -= THREADS) {
    __syncthreads();
    load_batch(s, args, top, range.x);
    __syncthreads();
    int count = min(THREADS, top - range.x);
    for (int j = 0; j < count; ++j) {
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

template <int SUB>
void launch_exact(const BlendBackwardArgs& args, int tiles, cudaStream_t stream) {
  const bool abs = args.grad_means2d_abs, depth = args.grad_depths;
  const int blocks = tiles * SUB * SUB, threads = BLOCK_PIXELS / (SUB * SUB);
  if (abs && depth)
    blend_backward_kernel<PROBE_NONE, true, true, SUB><<<blocks, threads, 0, stream>>>(args);
  else if (abs)
    blend_backward_kernel<PROBE_NONE, true, false, SUB><<<blocks, threads, 0, stream>>>(args);
  else if (depth)
    blend_backward_kernel<PROBE_NONE, false, true, SUB><<<blocks, threads, 0, stream>>>(args);
  else
    blend_backward_kernel<PROBE_NONE, false, false, SUB><<<blocks, threads, 0, stream>>>(args);
}

}  // namespace

void launch_blend_backward(const BlendBackwardArgs& args, int probe, cudaStream_t stream) {
  int tiles = args.tiles_x * args.tiles_y;
  if (tiles == 0) return;
  // The probes time the kernel without depth (their gradients are wrong anyway), one block a tile.
  if (probe == PROBE_WALK)
    blend_backward_kernel<PROBE_WALK, false, false><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (probe == PROBE_NO_ATOMICS)
    blend_backward_kernel<PROBE_NO_ATOMICS, false, false><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (args.split == 2)
    launch_exact<2>(args, tiles, stream);
  else
    launch_exact<1>(args, tiles, stream);
}
