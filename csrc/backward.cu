// The exact fp32 backward of the blend, shared by every blend variant: each pixel walks its
// tile's list back to front from its last contributor (backward.cuh). A warp handles one
// Gaussian at a time, so its gradient is summed across the warp before one atomic add per value.
#include "backward.cuh"

namespace {

constexpr int NUM_GRADS = 9;  // means2d (2), conic (3), opacity, colour (3)

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void __launch_bounds__(BLOCK_PIXELS) blend_backward_kernel(BlendBackwardArgs args) {
  __shared__ Batch s;
  __shared__ int s_max_last;

  const TilePixel tp = tile_pixel(args.ranges, args.tile_order, args.tiles_x, args.width, args.height);
  const float fx = (float)tp.x, fy = (float)tp.y;
  const int2 range = tp.range;
  const PixelGrad p = pixel_grad(args, tp.inside, tp.y * args.width + tp.x);
  const int end = range.x + block_max_last(p.last, s_max_last);
  Walk w{p.T_final};
  const int lane = threadIdx.x % 32;

  for (int top = end; top > range.x; top -= BLOCK_PIXELS) {
    __syncthreads();
    load_batch(s, args, top, range.x);
    __syncthreads();
    int count = min(BLOCK_PIXELS, top - range.x);
    for (int j = 0; j < count; ++j) {
      const int position = top - j - range.x;  // 1-based
      float g[NUM_GRADS] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      Entry e;
      const bool contributes = position <= p.last && unblend(w, p, s, j, fx, fy, e);
      if (contributes) {
        const float weight = e.alpha * w.T;
        for (int ch = 0; ch < 3; ++ch) g[6 + ch] = weight * p.dC[ch];
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
      for (int v = 0; v < NUM_GRADS; ++v) g[v] = warp_sum(g[v]);
      if (lane == 0) {
        int id = s.id[j];
        atomicAdd(&args.grad_means2d[2 * id], g[0]);
        atomicAdd(&args.grad_means2d[2 * id + 1], g[1]);
        for (int v = 0; v < 3; ++v) atomicAdd(&args.grad_conic[3 * id + v], g[2 + v]);
        atomicAdd(&args.grad_opacity[id], g[5]);
        for (int v = 0; v < 3; ++v) atomicAdd(&args.grad_colors[3 * id + v], g[6 + v]);
      }
    }
  }
}

}  // namespace

void launch_blend_backward(const BlendBackwardArgs& args, cudaStream_t stream) {
  int tiles = args.tiles_x * args.tiles_y;
  if (tiles == 0) return;
  blend_backward_kernel<<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
}
