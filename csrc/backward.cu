// The exact fp32 backward of the blend, shared by every blend variant: each pixel walks its
// tile's list back to front from its last contributor, recovering the transmittance before
// each entry as T / (1 - alpha) (Kerbl et al. 2023). A warp handles one Gaussian at a time,
// so its gradient is summed across the warp before one atomic add per value.
#include "common.cuh"
#include "config.h"
#include "kernels.h"

namespace {

constexpr int NUM_GRADS = 9;  // means2d (2), conic (3), opacity, colour (3)

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void __launch_bounds__(BLOCK_PIXELS) blend_backward_kernel(BlendBackwardArgs args) {
  __shared__ int s_id[BLOCK_PIXELS];
  __shared__ float2 s_xy[BLOCK_PIXELS];
  __shared__ float4 s_co[BLOCK_PIXELS];
  __shared__ float s_rgb[BLOCK_PIXELS][3];
  __shared__ int s_max_last;

  const TilePixel tp = tile_pixel(args.ranges, args.tile_order, args.tiles_x, args.width, args.height);
  const int px = tp.x, py = tp.y;
  const bool inside = tp.inside;
  const float fx = (float)px, fy = (float)py;
  const int2 range = tp.range;
  const int hw = args.height * args.width, pix = py * args.width + px;

  float T = 1.f, dC[3] = {0.f, 0.f, 0.f}, dT_final = 0.f;
  int last = 0;
  if (inside) {
    T = args.final_T[pix];
    last = args.n_contrib[pix];
    for (int ch = 0; ch < 3; ++ch) {
      dC[ch] = args.grad_image[ch * hw + pix];
      dT_final += dC[ch] * args.background[ch];
    }
    dT_final -= args.grad_alpha[pix];
  }
  const float T_final = T;
  if (threadIdx.x == 0) s_max_last = 0;
  __syncthreads();
  atomicMax(&s_max_last, last);
  __syncthreads();
  const int end = range.x + s_max_last;  // nothing behind the block's last contributor matters

  float accum[3] = {0.f, 0.f, 0.f}, last_alpha = 0.f, last_rgb[3] = {0.f, 0.f, 0.f};
  const float2* means2d = reinterpret_cast<const float2*>(args.means2d);
  const float4* conic_opacity = reinterpret_cast<const float4*>(args.conic_opacity);
  const int lane = threadIdx.x % 32;

  for (int top = end; top > range.x; top -= BLOCK_PIXELS) {
    __syncthreads();
    int k = top - 1 - (int)threadIdx.x;
    if (k >= range.x) {
      int id = args.point_list[k];
      s_id[threadIdx.x] = id;
      s_xy[threadIdx.x] = means2d[id];
      s_co[threadIdx.x] = conic_opacity[id];
      for (int ch = 0; ch < 3; ++ch) s_rgb[threadIdx.x][ch] = args.colors[3 * id + ch];
    }
    __syncthreads();
    int count = min(BLOCK_PIXELS, top - range.x);
    for (int j = 0; j < count; ++j) {
      const int position = top - j - range.x;  // 1-based
      float g[NUM_GRADS] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      bool contributes = false;
      if (position <= last) {
        float dx = s_xy[j].x - fx, dy = s_xy[j].y - fy;
        float4 co = s_co[j];
        float power = -0.5f * (co.x * dx * dx + co.z * dy * dy) - co.y * dx * dy;
        float G = __expf(power);
        float raw = co.w * G;
        float alpha = fminf(ALPHA_MAX, raw);
        if (!(power > 0.f) && !(alpha < ALPHA_MIN)) {
          contributes = true;
          T = T / (1.f - alpha);  // transmittance before this entry
          float d_alpha = 0.f;
          for (int ch = 0; ch < 3; ++ch) {
            accum[ch] = last_alpha * last_rgb[ch] + (1.f - last_alpha) * accum[ch];
            d_alpha += (s_rgb[j][ch] - accum[ch]) * dC[ch];
            g[6 + ch] = alpha * T * dC[ch];
            last_rgb[ch] = s_rgb[j][ch];
          }
          d_alpha = d_alpha * T - dT_final * T_final / (1.f - alpha);
          last_alpha = alpha;
          if (raw <= ALPHA_MAX) {  // the 0.99 clamp passes no gradient to o or power
            float d_power = d_alpha * raw;
            g[5] = d_alpha * G;
            g[0] = -d_power * (co.x * dx + co.y * dy);
            g[1] = -d_power * (co.z * dy + co.y * dx);
            g[2] = -0.5f * d_power * dx * dx;
            g[3] = -d_power * dx * dy;
            g[4] = -0.5f * d_power * dy * dy;
          }
        }
      }
      if (!__any_sync(0xffffffffu, contributes)) continue;
      for (int v = 0; v < NUM_GRADS; ++v) g[v] = warp_sum(g[v]);
      if (lane == 0) {
        int id = s_id[j];
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
