// The blend backward in GEMM form (issue 20): each pixel thread walks its list back to front as
// the exact backward does, but keeps only two numbers per (Gaussian, pixel) pair, dL/dpower and
// the colour weight alpha * T. The per-Gaussian sums over a warp's 32 pixels are then two small
// GEMMs on the tensor cores (mma m16n8k8 tf32) instead of 9 warp reductions:
//   dL/dv_g = sum_p dL/dpower_gp u_p,  u_p = (1, pu, pv, pu^2, pv^2, pu pv)   (tile-centred)
//   dL/dc_g = sum_p alpha_gp T_gp dL/dC_p
// and dL/dv goes to the 2D mean, conic and opacity by the chain rule of v's definition
// (reference/gemm_backward.py mirrors it). u_p is exact in tf32 (multiples of 1/4 up to 56.25).
// SPLIT: dL/dpower enters as two tf32 terms (hi + lo), so the sums are as exact as fp32's;
// otherwise it is rounded once (cvt.rn). The colour sums are always split (dC too, as the
// hi and lo columns of B), so only dL/dpower ever carries the tf32 rounding. DEPTH: z is a
// fourth colour (backward.cuh), its hi and lo dL/d(sum w z) filling B's two spare columns.
#include <cstdint>

#include "backward.cuh"

namespace {

constexpr int WARPS = BLOCK_PIXELS / 32;
constexpr int GROUP = 16;    // Gaussians per mma (its M)
constexpr int STRIDE = 36;   // staging row pitch: fragment reads hit 32 distinct banks
constexpr float CENTER = 0.5f * (TILE_SIZE - 1);

__device__ inline uint32_t tf32(float x) {
  uint32_t r;
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// d += a * b, A 16x8 row-major (tf32), B 8x8 column-major (tf32), fp32 accumulation.
__device__ inline void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// rows x (pixels 8k .. 8k+7) of a staged matrix as an A fragment, split into hi and lo.
template <bool SPLIT>
__device__ inline void load_a(const float* stage, int k, int grp, int tig, uint32_t (&hi)[4], uint32_t (&lo)[4]) {
  const float v[4] = {stage[grp * STRIDE + 8 * k + tig], stage[(grp + 8) * STRIDE + 8 * k + tig],
                      stage[grp * STRIDE + 8 * k + tig + 4], stage[(grp + 8) * STRIDE + 8 * k + tig + 4]};
  for (int i = 0; i < 4; ++i) {
    hi[i] = tf32(v[i]);
    if constexpr (SPLIT) lo[i] = tf32(v[i] - __uint_as_float(hi[i]));
  }
}

// The pixel matrix's column `col` (0..5 used) at the pixel of warp lane q.
__device__ inline float u_entry(int col, float pu, float pv) {
  switch (col) {
    case 0: return 1.f;
    case 1: return pu;
    case 2: return pv;
    case 3: return pu * pu;
    case 4: return pv * pv;
    case 5: return pu * pv;
    default: return 0.f;
  }
}

template <bool SPLIT, int PROBE, bool DEPTH>
__global__ void __launch_bounds__(BLOCK_PIXELS) blend_backward_gemm_kernel(BlendBackwardArgs args) {
  constexpr int NC = BLEND_CHANNELS<DEPTH>;
  __shared__ Batch<NC> s;
  __shared__ float s_stage[WARPS][2][GROUP * STRIDE];  // dL/dpower and alpha T, then the sums
  __shared__ int s_max_last;

  const TilePixel tp = tile_pixel(args.ranges, args.tile_order, args.tiles_x, args.width, args.height);
  const float fx = (float)tp.x, fy = (float)tp.y;
  const int2 range = tp.range;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, grp = lane >> 2, tig = lane & 3;
  const float ox = (float)((tp.tile % args.tiles_x) * TILE_SIZE) + CENTER;  // tile centre
  const float oy = (float)((tp.tile / args.tiles_x) * TILE_SIZE) + CENTER;

  const PixelGrad<NC> p = pixel_grad<NC>(args, tp.inside, tp.y * args.width + tp.x);

  // B fragments, fixed for the whole kernel: b0 is pixel 8k + tig, b1 pixel 8k + tig + 4, of
  // column grp. u: the pixel's tile-centred monomials; c: dC split into hi (columns 0-2) and
  // lo (3-5) parts, so that one fp32 value's two tf32 halves are summed by the GEMM itself
  // (DEPTH: the four channels' hi in columns 0-3, lo in 4-7).
  uint32_t bu[4][2], bc[4][2];
  for (int k = 0; k < 4; ++k)
    for (int h = 0; h < 2; ++h) {
      const int q = 8 * k + tig + 4 * h;  // the pixel's lane in this warp
      const int t = warp * 32 + q;
      const float pu = (float)(t % TILE_SIZE) - CENTER, pv = (float)(t / TILE_SIZE) - CENTER;
      bu[k][h] = tf32(u_entry(grp, pu, pv));
      const float d0 = __shfl_sync(0xffffffffu, p.dC[0], q), d1 = __shfl_sync(0xffffffffu, p.dC[1], q),
                  d2 = __shfl_sync(0xffffffffu, p.dC[2], q);
      float d = grp % NC == 0 ? d0 : grp % NC == 1 ? d1 : d2;
      if constexpr (DEPTH) {
        const float d3 = __shfl_sync(0xffffffffu, p.dC[3], q);
        d = grp % NC == 3 ? d3 : d;
      }
      const uint32_t d_hi = tf32(d);
      bc[k][h] = grp < NC ? d_hi : grp < 2 * NC ? tf32(d - __uint_as_float(d_hi)) : 0u;
    }

  const int end = range.x + block_max_last(p.last, s_max_last);
  int warp_last = p.last;
  for (int offset = 16; offset > 0; offset >>= 1) warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, offset));

  Walk<NC> w{p.T_final};
  float* stage_p = s_stage[warp][0];
  float* stage_w = s_stage[warp][1];
  float kept = 0.f;  // PROBE_WALK: the pair values; PROBE_NO_ATOMICS: what the atomics would add

  for (int top = end; top > range.x; top -= BLOCK_PIXELS) {
    __syncthreads();
    load_batch(s, args, top, range.x);
    __syncthreads();
    const int count = min(BLOCK_PIXELS, top - range.x);
    for (int j0 = 0; j0 < count; j0 += GROUP) {
      if (top - j0 - GROUP - range.x >= warp_last) continue;  // all 16 lie behind this warp's pixels
      unsigned mask = 0;  // the group's Gaussians that touch one of this warp's pixels
      for (int g = 0; g < GROUP; ++g) {
        const int j = j0 + g;
        const int position = top - j - range.x;  // 1-based
        float d_power = 0.f, weight = 0.f;
        bool contributes = false;
        Entry e;
        if (j < count && position <= p.last && unblend(w, p, s, j, fx, fy, e)) {
          contributes = true;
          weight = e.alpha * w.T;
          if (e.raw <= ALPHA_MAX) d_power = e.d_alpha * e.raw;  // the 0.99 clamp passes no gradient
        }
        if constexpr (PROBE == PROBE_WALK) {
          kept += d_power + weight;
          if (__any_sync(0xffffffffu, contributes)) mask |= 1u << g;
          continue;
        }
        stage_p[g * STRIDE + lane] = d_power;
        stage_w[g * STRIDE + lane] = weight;
        if (__any_sync(0xffffffffu, contributes)) mask |= 1u << g;
      }
      if (mask == 0 || PROBE == PROBE_WALK) continue;
      __syncwarp();

      float dv[4] = {0.f, 0.f, 0.f, 0.f}, dc[4] = {0.f, 0.f, 0.f, 0.f};
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t hi[4], lo[4];
        load_a<SPLIT>(stage_p, kk, grp, tig, hi, lo);
        mma(dv, hi, bu[kk][0], bu[kk][1]);
        if constexpr (SPLIT) mma(dv, lo, bu[kk][0], bu[kk][1]);
        load_a<true>(stage_w, kk, grp, tig, hi, lo);
        mma(dc, hi, bc[kk][0], bc[kk][1]);
        mma(dc, lo, bc[kk][0], bc[kk][1]);
      }
      __syncwarp();
      // Accumulators: rows grp and grp + 8 (Gaussians), columns 2 tig and 2 tig + 1.
      stage_p[grp * STRIDE + 2 * tig] = dv[0];
      stage_p[grp * STRIDE + 2 * tig + 1] = dv[1];
      stage_p[(grp + 8) * STRIDE + 2 * tig] = dv[2];
      stage_p[(grp + 8) * STRIDE + 2 * tig + 1] = dv[3];
      stage_w[grp * STRIDE + 2 * tig] = dc[0];
      stage_w[grp * STRIDE + 2 * tig + 1] = dc[1];
      stage_w[(grp + 8) * STRIDE + 2 * tig] = dc[2];
      stage_w[(grp + 8) * STRIDE + 2 * tig + 1] = dc[3];
      __syncwarp();

      // Lanes 0-15: the chain rule and the mean, conic and opacity atomics of Gaussian `lane`;
      // lanes 16-31: the colour atomics of Gaussian `lane - 16`.
      const int g = lane % GROUP;
      if (mask >> g & 1u) {
        const int j = j0 + g;
        const int id = s.id[j];
        if (lane < GROUP) {
          const float* sums = stage_p + g * STRIDE;  // d const, d pu, d pv, d pu^2, d pv^2, d pu pv
          const float4 co = s.co[j];
          const float mx = s.xy[j].x - ox, my = s.xy[j].y - oy;
          const float lx = co.x * mx + co.y * my, ly = co.z * my + co.y * mx;
          grad_add<PROBE>(&args.grad_means2d[2 * id], -lx * sums[0] + co.x * sums[1] + co.y * sums[2], kept);
          grad_add<PROBE>(&args.grad_means2d[2 * id + 1], -ly * sums[0] + co.y * sums[1] + co.z * sums[2], kept);
          grad_add<PROBE>(&args.grad_conic[3 * id], -0.5f * mx * mx * sums[0] + mx * sums[1] - 0.5f * sums[3], kept);
          grad_add<PROBE>(&args.grad_conic[3 * id + 1], -mx * my * sums[0] + my * sums[1] + mx * sums[2] - sums[5], kept);
          grad_add<PROBE>(&args.grad_conic[3 * id + 2], -0.5f * my * my * sums[0] + my * sums[2] - 0.5f * sums[4], kept);
          grad_add<PROBE>(&args.grad_opacity[id], sums[0] / co.w, kept);  // alpha = o exp(power)
        } else {
          const float* sums = stage_w + g * STRIDE;
          for (int ch = 0; ch < 3; ++ch) grad_add<PROBE>(&args.grad_colors[3 * id + ch], sums[ch] + sums[ch + NC], kept);
          if constexpr (DEPTH) grad_add<PROBE>(&args.grad_depths[id], sums[3] + sums[7], kept);
        }
      }
      __syncwarp();
    }
  }
  if constexpr (PROBE != PROBE_NONE) keep(kept, args.grad_opacity);
}

// The probes time the kernel without depth (their gradients are wrong anyway).
template <bool SPLIT>
void launch_split(const BlendBackwardArgs& args, int probe, int tiles, cudaStream_t stream) {
  if (probe == PROBE_WALK)
    blend_backward_gemm_kernel<SPLIT, PROBE_WALK, false><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (probe == PROBE_NO_ATOMICS)
    blend_backward_gemm_kernel<SPLIT, PROBE_NO_ATOMICS, false><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else if (args.grad_depths)
    blend_backward_gemm_kernel<SPLIT, PROBE_NONE, true><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
  else
    blend_backward_gemm_kernel<SPLIT, PROBE_NONE, false><<<tiles, BLOCK_PIXELS, 0, stream>>>(args);
}

}  // namespace

void launch_blend_backward_gemm(const BlendBackwardArgs& args, bool split, int probe, cudaStream_t stream) {
  const int tiles = args.tiles_x * args.tiles_y;
  if (tiles == 0) return;
  if (split)
    launch_split<true>(args, probe, tiles, stream);
  else
    launch_split<false>(args, probe, tiles, stream);
}
