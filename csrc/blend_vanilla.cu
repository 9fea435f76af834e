// Stage 4, vanilla: one 16x16 block per tile, one thread per pixel, the tile's depth-sorted
// list streamed through shared memory in batches of 256 Gaussians (Kerbl et al. 2023).
#include "blend.h"
#include "common.cuh"
#include "config.h"

namespace {

// COUNT: also add, per Gaussian, the number of pixels it contributes to (args.hit_counts; with
// args.hit_mask only the pixels it marks), through per-batch shared counters flushed once per
// batch. DEPTH: also composite z as a fourth channel into args.depth.
template <bool COUNT, bool DEPTH>
__global__ void __launch_bounds__(BLOCK_PIXELS) blend_vanilla_kernel(BlendArgs args) {
  constexpr int NC = BLEND_CHANNELS<DEPTH>;
  __shared__ float2 s_xy[BLOCK_PIXELS];
  __shared__ float4 s_co[BLOCK_PIXELS];
  __shared__ float s_rgb[BLOCK_PIXELS][NC];
  __shared__ int s_id[COUNT ? BLOCK_PIXELS : 1];
  __shared__ int s_hits[COUNT ? BLOCK_PIXELS : 1];

  const TilePixel tp = tile_pixel(args.ranges, args.tile_order, args.tiles_x, args.width, args.height);
  const int px = tp.x, py = tp.y;
  const bool inside = tp.inside;
  const float fx = (float)px, fy = (float)py;
  const int2 range = tp.range;

  bool done = !inside;
  const bool counted = COUNT && inside && (!args.hit_mask || args.hit_mask[py * args.width + px]);
  float T = 1.f, C[NC] = {};
  int last = 0;  // 1-based list position of the last contributor
  const float2* means2d = reinterpret_cast<const float2*>(args.means2d);
  const float4* conic_opacity = reinterpret_cast<const float4*>(args.conic_opacity);

  for (int base = range.x; base < range.y; base += BLOCK_PIXELS) {
    if (__syncthreads_count(done) == BLOCK_PIXELS) break;
    int k = base + threadIdx.x;
    if (k < range.y) {
      int id = args.point_list[k];
      s_xy[threadIdx.x] = means2d[id];
      s_co[threadIdx.x] = conic_opacity[id];
      for (int ch = 0; ch < 3; ++ch) s_rgb[threadIdx.x][ch] = args.colors[3 * id + ch];
      if constexpr (DEPTH) s_rgb[threadIdx.x][3] = args.depths[id];
      if constexpr (COUNT) {
        s_id[threadIdx.x] = id;
        s_hits[threadIdx.x] = 0;
      }
    }
    __syncthreads();
    int count = min(BLOCK_PIXELS, range.y - base);
    for (int j = 0; !done && j < count; ++j) {
      float dx = s_xy[j].x - fx, dy = s_xy[j].y - fy;
      float4 co = s_co[j];
      float power = -0.5f * (co.x * dx * dx + co.z * dy * dy) - co.y * dx * dy;
      if (power > 0.f) continue;
      float alpha = fminf(ALPHA_MAX, co.w * __expf(power));
      if (alpha < ALPHA_MIN) continue;
      float next_T = T * (1.f - alpha);
      if (next_T < T_MIN) {
        done = true;
        break;
      }
      for (int ch = 0; ch < NC; ++ch) C[ch] += s_rgb[j][ch] * alpha * T;
      T = next_T;
      last = base + j - range.x + 1;
      if constexpr (COUNT) {
        if (counted) atomicAdd(&s_hits[j], 1);
      }
    }
    if constexpr (COUNT) {
      __syncthreads();
      if (threadIdx.x < count && s_hits[threadIdx.x] > 0) atomicAdd(&args.hit_counts[s_id[threadIdx.x]], s_hits[threadIdx.x]);
    }
  }
  if (!inside) return;
  const int hw = args.height * args.width, pix = py * args.width + px;
  for (int ch = 0; ch < 3; ++ch) args.image[ch * hw + pix] = C[ch] + T * args.background[ch];
  args.final_T[pix] = T;
  args.n_contrib[pix] = last;
  if constexpr (DEPTH) args.depth[pix] = C[3];
}

}  // namespace

void launch_blend_vanilla(const BlendArgs& args, cudaStream_t stream) {
  int tiles = args.tiles_x * args.tiles_y;
  if (tiles == 0) return;
  if (args.hit_counts)  // hit counts never ask for depth (gsexp/render/cuda hit_counts)
    blend_vanilla_kernel<true, false><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (args.options.depth)
    blend_vanilla_kernel<false, true><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else
    blend_vanilla_kernel<false, false><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
}
