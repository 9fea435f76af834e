// Stage 4, matrix forms: GEMM-GS and TC-GS. With per-pair coefficients, a Gaussian's
// exponent at every pixel of a tile is a dot product of an 8-vector per Gaussian and an
// 8-vector per pixel, so 16 Gaussians x the tile's 256 pixels is one small GEMM.
// Each warp owns 32 pixels (two tile rows). For every 16 Gaussians of the batch it multiplies
// their vectors with its pixels' vectors on the tensor cores (mma.sync m16n8k8, fp16 or tf32
// operands, fp32 accumulation) into its own shared slab; each pixel then reads its 16
// exponents, keeps a bit for each one that can pass, and composites only those. Only the warp
// reads what it wrote, so __syncwarp separates the two, and a warp whose pixels are all done
// skips both. Loads run ahead through cp.async (see the kernel).
//
// Pixel vector, both forms: (1, u, v, u^2, v^2, uv, 1, 1).
//   gemm: Gaussian vector (k, lx, ly, qx, qy, qxy, 0, 0)      -> power
//   tcgs: Gaussian vector (k/3 + ln(o)/3, lx, ly, qx, qy, qxy, same, same) -> beta = ln o + power
// (u, v) are tile-centred with G2L, image pixel coordinates without. The coefficients are
// rounded once to the operand format, as the reference does.
// Semantics as vanilla: 1/255 skip, 0.99 clamp, exact per-pixel termination, the exact last
// contributor; power is clamped to <= 0 (its rounding can exceed 0 at a Gaussian's centre).
// half_blend (tcgs) holds T and colour in fp16 after every entry, as TC-GS's code.
// depth: z rides in the colour's unused fourth lane and composites as a fourth channel.
#include <cuda_fp16.h>

#include <type_traits>

#include "blend.h"
#include "common.cuh"
#include "config.h"

namespace {

constexpr int CHUNK = 16;        // Gaussians per mma (its M)
constexpr float TILE_CENTER = 0.5f * (TILE_SIZE - 1);

__device__ inline float to_tf32(float x) {
  uint32_t r;
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

template <int PREC>
__device__ inline float round_operand(float x) {
  if constexpr (PREC == PREC_TF32) return to_tf32(x);
  if constexpr (PREC == PREC_FP16) return __half2float(__float2half_rn(x));  // overflow -> inf
  return x;
}

__device__ inline uint32_t pack_half2(float lo, float hi) {
  __half2 h = __halves2half2(__float2half_rn(lo), __float2half_rn(hi));
  return *reinterpret_cast<uint32_t*>(&h);
}

// cp.async: global -> shared without a register round trip; completes per thread, in groups.
template <int BYTES>
__device__ inline void cp_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem), "n"(BYTES));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING)); }
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }

// D = A B for A 16x8 (row), B 8x8 (col), fp32 accumulators starting at zero.
__device__ inline void mma_fp16(float d[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0), "f"(0.f));
}

__device__ inline void mma_tf32(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.f));
}

// Tile pixel p's coordinates in the frame the vectors use.
__device__ inline void pixel_uv(int p, int ox, int oy, bool g2l, float& u, float& v) {
  u = (float)(p % TILE_SIZE);
  v = (float)(p / TILE_SIZE);
  if (g2l) {
    u -= TILE_CENTER;
    v -= TILE_CENTER;
  } else {
    u += (float)ox;
    v += (float)oy;
  }
}

// Entry k of the pixel vector (1, u, v, u^2, v^2, uv, 1, 1), rounded to the operand format.
template <int PREC>
__device__ inline float pixel_entry(float u, float v, int k) {
  float f = 1.f;
  switch (k) {
    case 1: f = u; break;
    case 2: f = v; break;
    case 3: f = u * u; break;
    case 4: f = v * v; break;
    case 5: f = u * v; break;
  }
  return round_operand<PREC>(f);
}

template <int PREC>
__device__ inline void pixel_vector(float u, float v, float f[8]) {
  for (int k = 0; k < 8; ++k) f[k] = pixel_entry<PREC>(u, v, k);
}

// One Gaussian's 8-vector for the tile whose first pixel is (ox, oy); returns what the blend
// tests the exponent against: o for gemm, ln o for tcgs. The setup runs in
// float64 for fp32 operands (the constant and linear terms cancel in the dot product, so
// their rounding is the whole error budget) and in fp32 otherwise, where rounding the
// operands to 10 mantissa bits dominates.
template <int PREC>
__device__ inline float gaussian_vector(float2 mean, float4 co, int ox, int oy, const RasterOptions& opt, float g[8]) {
  using Real = std::conditional_t<PREC == PREC_FP32, double, float>;
  const Real cx = opt.g2l ? ox + (Real)TILE_CENTER : (Real)0, cy = opt.g2l ? oy + (Real)TILE_CENTER : (Real)0;
  const Real mx = (Real)mean.x - cx, my = (Real)mean.y - cy;
  const Real a = co.x, b = co.y, c = co.z, half = (Real)0.5;
  const Real k = -half * a * mx * mx - half * c * my * my - b * mx * my;
  g[1] = (float)(a * mx + b * my);
  g[2] = (float)(c * my + b * mx);
  g[3] = -0.5f * co.x;
  g[4] = -0.5f * co.z;
  g[5] = -co.y;
  float level = co.w;
  if (opt.blend == BLEND_TCGS) {  // the constant (with ln o) split in thirds keeps each operand small
    const Real log_o = log((Real)co.w);
    g[0] = g[6] = g[7] = (float)((k + log_o) / (Real)3);
    level = (float)log_o;
  } else {
    g[0] = (float)k;
    g[6] = g[7] = 0.f;
  }
  for (int i = 0; i < 8; ++i) g[i] = round_operand<PREC>(g[i]);
  return level;
}

// Where a chunk's 16 exponents go between the tensor cores and the pixels: per warp, one row of
// 16 floats per pixel, padded to 20 so that both the fragment stores (float2) and the pixel's
// four float4 loads are free of bank conflicts.
constexpr int SLAB_STRIDE = CHUNK + 4;

// The list is consumed in batches of BATCH Gaussians through a three-stage cp.async pipeline
// run by the first BATCH threads: ids of batch b+2, features of batch b+1 and vectors of
// batch b are in flight together (each loader thread handles the same slot j in every
// stage, so only the vectors need a block barrier).
// Within a batch, a warp takes 16 Gaussians at a time: the tensor cores write the 16 x 32
// exponents to the warp's slab, each pixel reads its 16, keeps a bit for each one at or over
// ln(1/255) (TC-GS's EarlyCull: the log-domain test before any exp; for GEMM-GS a bound,
// since o < 1) and then visits only those entries, in list order.
// SUB = 2 (rasterizer.tile_split): four blocks share a tile, each four of its rows (two warps),
// each walking the list for its own pixels: the same arithmetic per pixel, so the same image.
template <int PREC, int BATCH, bool TCGS, bool DEPTH, int SUB = 1>
__global__ void __launch_bounds__(BLOCK_PIXELS / (SUB * SUB)) blend_matrix_kernel(BlendArgs args) {
  constexpr int NC = BLEND_CHANNELS<DEPTH>;
  constexpr int THREADS = BLOCK_PIXELS / (SUB * SUB), WARPS = THREADS / 32;
  static_assert(BATCH % CHUNK == 0 && BATCH <= THREADS, "one loader thread per Gaussian of the batch");
  __shared__ int s_ids[3][BATCH];
  __shared__ float2 s_xy[2][BATCH];
  __shared__ float4 s_co[2][BATCH];
  __shared__ float4 s_rgb[2][BATCH];  // xyz used (w: z with DEPTH): one 16-byte load per contributor
  __shared__ __align__(16) float s_vec[BATCH][8];  // fp16: four half2 per row
  __shared__ float s_level[BATCH];                 // o (gemm) or ln o (tcgs)
  __shared__ __align__(16) float s_slab[WARPS][32][SLAB_STRIDE];

  const RasterOptions opt = args.options;
  const bool cull = !TCGS || opt.early_cull;
  int local;  // this thread's pixel in the tile; its warp's first is 32 * tile_warp
  const TilePixel tp = tile_pixel<SUB>(args.ranges, args.tile_order, args.tiles_x, args.width, args.height, &local);
  const int ox = (tp.tile % args.tiles_x) * TILE_SIZE, oy = (tp.tile / args.tiles_x) * TILE_SIZE;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, grp = lane >> 2, tig = lane & 3;
  const int tile_warp = local / 32;
  const int2 range = tp.range;
  const int num_batches = (range.y - range.x + BATCH - 1) / BATCH;
  const int j_load = threadIdx.x;  // this thread's slot when it is a loader
  const bool loader = j_load < BATCH;
  float* const my_row = s_slab[warp][lane];  // this pixel's exponents of the current chunk

  float mine[8];  // this pixel's vector (the fp32 path's dot product)
  {
    float u, v;
    pixel_uv(local, ox, oy, opt.g2l, u, v);
    pixel_vector<PREC>(u, v, mine);
  }
  // B fragments of this warp's four 8-pixel column blocks, fixed for the whole list.
  uint32_t bfrag[4][2];
  if constexpr (PREC != PREC_FP32) {
    for (int nt = 0; nt < 4; ++nt) {
      float u, v;
      pixel_uv(32 * tile_warp + 8 * nt + grp, ox, oy, opt.g2l, u, v);
      if constexpr (PREC == PREC_FP16) {
        bfrag[nt][0] = pack_half2(pixel_entry<PREC>(u, v, 2 * tig), pixel_entry<PREC>(u, v, 2 * tig + 1));
      } else {
        bfrag[nt][0] = __float_as_uint(pixel_entry<PREC>(u, v, tig));
        bfrag[nt][1] = __float_as_uint(pixel_entry<PREC>(u, v, tig + 4));
      }
    }
  }

  // Every thread commits a group per stage (empty ones included) so the counts agree.
  auto load_ids = [&](int b) {
    const int k = range.x + b * BATCH + j_load;
    if (loader && b < num_batches && k < range.y) cp_async<4>(&s_ids[b % 3][j_load], args.point_list + k);
    cp_async_commit();
  };
  auto load_features = [&](int b) {
    const int k = range.x + b * BATCH + j_load;
    if (loader && b < num_batches && k < range.y) {
      const int id = s_ids[b % 3][j_load];
      cp_async<8>(&s_xy[b & 1][j_load], args.means2d + 2 * id);
      cp_async<16>(&s_co[b & 1][j_load], args.conic_opacity + 4 * id);
      float* rgb = &s_rgb[b & 1][j_load].x;
      for (int ch = 0; ch < 3; ++ch) cp_async<4>(rgb + ch, args.colors + 3 * id + ch);
      if constexpr (DEPTH) cp_async<4>(rgb + 3, args.depths + id);
    }
    cp_async_commit();
  };
  load_ids(0);
  load_ids(1);
  cp_async_wait<1>();  // ids(0)
  load_features(0);

  bool done = !tp.inside;
  float T = 1.f, C[NC] = {};
  int last = 0;
  // Composite the entries of `mask` (bits over Gaussians c0 .. c0+15 of batch b) into this
  // pixel, in list order. HALF: T and colour rounded to fp16 after every entry (TC-GS).
  auto composite = [&](int b, int c0, int buf, uint32_t mask, auto half) {
    constexpr bool HALF = decltype(half)::value;
    while (mask) {
      const int j = __ffs(mask) - 1;
      mask &= mask - 1;
      const int e = c0 + j;
      const float x = my_row[j], level = s_level[e];
      float alpha;
      if constexpr (TCGS) {
        const float beta = x > level ? level : x;  // power <= 0; a NaN stays NaN
        alpha = fminf(ALPHA_MAX, __expf(beta));
        if (cull ? beta < LOG_ALPHA_MIN : alpha < ALPHA_MIN) continue;
      } else {
        alpha = fminf(ALPHA_MAX, level * __expf(x > 0.f ? 0.f : x));
        if (alpha < ALPHA_MIN) continue;
      }
      float next_T = T * (1.f - alpha);
      if constexpr (HALF) next_T = round_operand<PREC_FP16>(next_T);
      if (next_T < T_MIN) {
        done = true;
        return;
      }
      const float4 rgb = s_rgb[buf][e];
      const float w = alpha * T;
      C[0] += rgb.x * w;
      C[1] += rgb.y * w;
      C[2] += rgb.z * w;
      if constexpr (DEPTH) C[3] += rgb.w * w;
      if constexpr (HALF) {  // depth too, as the reference's fourth channel
        for (int ch = 0; ch < NC; ++ch) C[ch] = round_operand<PREC_FP16>(C[ch]);
      }
      T = next_T;
      last = b * BATCH + e + 1;
    }
  };
  for (int b = 0; b < num_batches; ++b) {
    if (__syncthreads_count(done) == THREADS) break;
    const int count = min(BATCH, range.y - range.x - b * BATCH), buf = b & 1;
    load_ids(b + 2);       // in flight: ids(b+1), features(b), ids(b+2)
    cp_async_wait<2>();    // ids(b+1) landed
    load_features(b + 1);  // in flight: features(b), ids(b+2), features(b+1)
    cp_async_wait<2>();    // features(b) landed
    if (loader) {
      float g[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};  // slots past the list: masked out below
      s_level[j_load] = j_load < count ? gaussian_vector<PREC>(s_xy[buf][j_load], s_co[buf][j_load], ox, oy, opt, g) : 0.f;
      if constexpr (PREC == PREC_FP16) {
        uint32_t* row = reinterpret_cast<uint32_t*>(s_vec[j_load]);
        for (int k = 0; k < 4; ++k) row[k] = pack_half2(g[2 * k], g[2 * k + 1]);
      } else {
        for (int k = 0; k < 8; ++k) s_vec[j_load][k] = g[k];
      }
    }
    __syncthreads();

    for (int c0 = 0; c0 < count; c0 += CHUNK) {
      if (__all_sync(0xffffffffu, done)) break;  // warp-uniform: the warp's pixels are finished
      if constexpr (PREC == PREC_FP32) {
        for (int j = 0; j < CHUNK; ++j) {
          float x = 0.f;
          for (int k = 0; k < 8; ++k) x += s_vec[c0 + j][k] * mine[k];
          my_row[j] = x;  // read back by this thread only
        }
      } else {
        // mma rows grp and grp+8 are Gaussians 2grp and 2grp+1, so each accumulator pair
        // lands as one float2 in the pixel-major slab.
        const uint32_t* r0 = reinterpret_cast<const uint32_t*>(s_vec[c0 + 2 * grp]);
        const uint32_t* r1 = reinterpret_cast<const uint32_t*>(s_vec[c0 + 2 * grp + 1]);
        for (int nt = 0; nt < 4; ++nt) {
          float d[4];
          if constexpr (PREC == PREC_FP16) {
            mma_fp16(d, r0[tig], r1[tig], bfrag[nt][0]);
          } else {
            mma_tf32(d, r0[tig], r1[tig], r0[tig + 4], r1[tig + 4], bfrag[nt][0], bfrag[nt][1]);
          }
          const int p = 8 * nt + 2 * tig;
          *reinterpret_cast<float2*>(&s_slab[warp][p][2 * grp]) = make_float2(d[0], d[2]);
          *reinterpret_cast<float2*>(&s_slab[warp][p + 1][2 * grp]) = make_float2(d[1], d[3]);
        }
        __syncwarp();
      }
      if (!done) {
        uint32_t mask = count - c0 < CHUNK ? (1u << (count - c0)) - 1 : 0xffffu;  // the list's end
        if (cull) {  // written as !(x < level) so that a NaN is kept, as vanilla keeps it
          uint32_t keep = 0;
          for (int q = 0; q < CHUNK / 4; ++q) {
            const float4 t = reinterpret_cast<const float4*>(my_row)[q];
            keep |= (uint32_t)!(t.x < LOG_ALPHA_MIN) << (4 * q) | (uint32_t)!(t.y < LOG_ALPHA_MIN) << (4 * q + 1) |
                    (uint32_t)!(t.z < LOG_ALPHA_MIN) << (4 * q + 2) | (uint32_t)!(t.w < LOG_ALPHA_MIN) << (4 * q + 3);
          }
          mask &= keep;
        }
        if (opt.half_blend)
          composite(b, c0, buf, mask, std::true_type{});
        else
          composite(b, c0, buf, mask, std::false_type{});
      }
      __syncwarp();  // the slab is rewritten for the next chunk
    }
  }
  cp_async_wait_all();  // nothing may land in shared memory after the block is gone
  if (!tp.inside) return;
  const int hw = args.height * args.width, pix = tp.y * args.width + tp.x;
  for (int ch = 0; ch < 3; ++ch) args.image[ch * hw + pix] = C[ch] + T * args.background[ch];
  args.final_T[pix] = T;
  args.n_contrib[pix] = last;
  if constexpr (DEPTH) args.depth[pix] = C[3];
}

template <int PREC, bool TCGS, bool DEPTH>
void launch(const BlendArgs& args, int tiles, cudaStream_t stream) {
  if (args.split == 2) {  // 64 threads a block: batches of at most 64 (the same image)
    const int blocks = 4 * tiles, threads = BLOCK_PIXELS / 4;
    if (args.options.batch == 32)
      blend_matrix_kernel<PREC, 32, TCGS, DEPTH, 2><<<blocks, threads, 0, stream>>>(args);
    else
      blend_matrix_kernel<PREC, 64, TCGS, DEPTH, 2><<<blocks, threads, 0, stream>>>(args);
    return;
  }
  switch (args.options.batch) {
    case 32: blend_matrix_kernel<PREC, 32, TCGS, DEPTH><<<tiles, BLOCK_PIXELS, 0, stream>>>(args); break;
    case 64: blend_matrix_kernel<PREC, 64, TCGS, DEPTH><<<tiles, BLOCK_PIXELS, 0, stream>>>(args); break;
    default: blend_matrix_kernel<PREC, 128, TCGS, DEPTH><<<tiles, BLOCK_PIXELS, 0, stream>>>(args); break;
  }
}

template <int PREC, bool TCGS>
void launch(const BlendArgs& args, int tiles, cudaStream_t stream) {
  if (args.options.depth)
    launch<PREC, TCGS, true>(args, tiles, stream);
  else
    launch<PREC, TCGS, false>(args, tiles, stream);
}

template <int PREC>
void launch(const BlendArgs& args, int tiles, cudaStream_t stream) {
  if (args.options.blend == BLEND_TCGS)
    launch<PREC, true>(args, tiles, stream);
  else
    launch<PREC, false>(args, tiles, stream);
}

}  // namespace

void launch_blend_matrix(const BlendArgs& args, cudaStream_t stream) {
  int tiles = args.tiles_x * args.tiles_y;
  if (tiles == 0) return;
  switch (args.options.precision) {
    case PREC_FP32: launch<PREC_FP32>(args, tiles, stream); break;
    case PREC_TF32: launch<PREC_TF32>(args, tiles, stream); break;
    default: launch<PREC_FP16>(args, tiles, stream); break;
  }
}
