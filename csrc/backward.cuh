// What the two blend backwards (backward.cu: exact, backward_gemm.cu: sums on tensor cores)
// share: a pixel's incoming gradient, the block's batches of its tile list, and the walk back to
// front that recovers each entry's transmittance as T / (1 - alpha) (Kerbl et al. 2023).
// NC: the channels composited, 3, or 4 with depth (z a fourth colour over a background of 0,
// its gradient dL/d(sum w z) a fourth dL/dC; blend.h BLEND_CHANNELS).
#pragma once

#include "blend.h"
#include "common.cuh"
#include "config.h"
#include "kernels.h"

// A pixel's part of the backward: dL/dC, dL/d(final T) (the background's share less the alpha
// output's), and what it walks back from. Pixels outside the image walk nothing.
template <int NC>
struct PixelGrad {
  float dC[NC] = {};
  float dT_final = 0.f;
  float T_final = 1.f;
  int last = 0;  // 1-based list position of its last contributor
};

template <int NC>
__device__ inline PixelGrad<NC> pixel_grad(const BlendBackwardArgs& args, bool inside, int pix) {
  PixelGrad<NC> p;
  if (!inside) return p;
  const int hw = args.height * args.width;
  p.T_final = args.final_T[pix];
  p.last = args.n_contrib[pix];
  for (int ch = 0; ch < 3; ++ch) {
    p.dC[ch] = args.grad_image[ch * hw + pix];
    p.dT_final += p.dC[ch] * args.background[ch];
  }
  p.dT_final -= args.grad_alpha[pix];
  if constexpr (NC == 4) p.dC[3] = args.grad_depth[pix];  // its background is 0: no dT_final term
  return p;
}

// The largest `last` of the block: nothing behind the block's last contributor matters.
__device__ inline int block_max_last(int last, int& s_max_last) {
  if (threadIdx.x == 0) s_max_last = 0;
  __syncthreads();
  atomicMax(&s_max_last, last);
  __syncthreads();
  return s_max_last;
}

// One batch of the tile's list in shared memory, back to front: entry j is list index top-1-j.
// SIZE: the block's threads (one entry each).
template <int NC, int SIZE = BLOCK_PIXELS>
struct Batch {
  int id[SIZE];
  float2 xy[SIZE];
  float4 co[SIZE];
  float rgb[SIZE][NC];
};

// Loads the batch ending at `top` (one entry per thread); the caller syncs around it.
template <int NC, int SIZE>
__device__ inline void load_batch(Batch<NC, SIZE>& b, const BlendBackwardArgs& args, int top, int start) {
  const int k = top - 1 - (int)threadIdx.x;
  if (k < start) return;
  const int id = args.point_list[k];
  b.id[threadIdx.x] = id;
  b.xy[threadIdx.x] = reinterpret_cast<const float2*>(args.means2d)[id];
  b.co[threadIdx.x] = reinterpret_cast<const float4*>(args.conic_opacity)[id];
  for (int ch = 0; ch < 3; ++ch) b.rgb[threadIdx.x][ch] = args.colors[3 * id + ch];
  if constexpr (NC == 4) b.rgb[threadIdx.x][3] = args.depths[id];
}

// A pixel's walk back to front: T before the entry last un-blended, and the colour behind it.
template <int NC>
struct Walk {
  float T;
  float accum[NC] = {};
  float last_alpha = 0.f;
  float last_rgb[NC] = {};
};

// One entry as the pixel at (fx, fy) saw it, when it contributed.
struct Entry {
  float dx, dy;   // mean - pixel
  float G, raw;   // exp(power) and o G (alpha before its 0.99 clamp)
  float alpha;
  float d_alpha;  // dL/dalpha
};

// Un-blends entry j of the batch: false if it did not contribute (the walk is unchanged), else
// fills e and steps the walk to the transmittance before it.
template <int NC, int SIZE>
__device__ inline bool unblend(Walk<NC>& w, const PixelGrad<NC>& p, const Batch<NC, SIZE>& b, int j, float fx, float fy,
                               Entry& e) {
  e.dx = b.xy[j].x - fx;
  e.dy = b.xy[j].y - fy;
  const float4 co = b.co[j];
  const float power = -0.5f * (co.x * e.dx * e.dx + co.z * e.dy * e.dy) - co.y * e.dx * e.dy;
  e.G = __expf(power);
  e.raw = co.w * e.G;
  e.alpha = fminf(ALPHA_MAX, e.raw);
  if (power > 0.f || e.alpha < ALPHA_MIN) return false;
  w.T = w.T / (1.f - e.alpha);
  float d_alpha = 0.f;
  for (int ch = 0; ch < NC; ++ch) {
    w.accum[ch] = w.last_alpha * w.last_rgb[ch] + (1.f - w.last_alpha) * w.accum[ch];
    d_alpha += (b.rgb[j][ch] - w.accum[ch]) * p.dC[ch];
    w.last_rgb[ch] = b.rgb[j][ch];
  }
  e.d_alpha = d_alpha * w.T - p.dT_final * p.T_final / (1.f - e.alpha);
  w.last_alpha = e.alpha;
  return true;
}

// An atomic add of the blend backward; PROBE_NO_ATOMICS leaves it out but keeps its value and
// address computed (summed into kept, which keep() then guards).
template <int PROBE>
__device__ inline void grad_add(float* p, float v, float& kept) {
  if constexpr (PROBE == PROBE_NO_ATOMICS)
    kept += v + (float)(unsigned)(size_t)p;
  else
    atomicAdd(p, v);
}

// A probe's stand-in for a store it leaves out: keeps v computed, writes only if v has one
// NaN bit pattern no gradient takes.
__device__ inline void keep(float v, float* sink) {
  if (__float_as_uint(v) == 0x7fbadbadu) *sink = v;
}
