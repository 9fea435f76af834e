// Launchers of the CUDA stages. Raw pointers only, so the .cu files compile without torch.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "config.h"

struct Camera {
  float view[12];  // world -> camera, rows of [R | t]
  float fx, fy, cx, cy;
  float tan_x, tan_y;  // tan(fov / 2)
  float cam_pos[3];    // camera centre in world space
  int width, height;
  int tiles_x, tiles_y;
};

// ---- preprocess.cu ----------------------------------------------------------------------
struct PreprocessOut {
  float* means2d;        // [N,2]
  float* conic_opacity;  // [N,4] (a, b, c, opacity)
  float* colors;         // [N,3]
  float* depths;         // [N]
  int* radii;            // [N] 0 when culled
  int* tiles_touched;    // [N]
};

// SH coefficients, either one [N, bases, 3] array or the DC term [N,1,3] and the rest
// [N, bases - 1, 3] as training keeps them (no concatenation per step): coefficient k of
// Gaussian i, channel c, is dc[i * dc_stride + c] for k = 0, else rest[i * rest_stride + 3 (k - 1) + c].
// rest_len: the floats of a row of rest, 3 (bases - 1).
template <typename T>
struct ShView {
  T* dc;
  T* rest;
  int dc_stride, rest_stride, rest_len;
  __host__ __device__ T& at(int64_t i, int k, int c) const {
    return k == 0 ? dc[i * dc_stride + c] : rest[i * rest_stride + 3 * (k - 1) + c];
  }
};

// The raw (pre-activation) parameters as the optimiser holds them; preprocess applies
// exp / normalise / sigmoid itself.
struct GaussianParams {
  const float* means;           // [N,3]
  const float* log_scales;      // [N,3]
  const float* quats;           // [N,4] (w, x, y, z), any norm
  const float* opacity_logits;  // [N]
  ShView<const float> sh;
};
// Their gradients (the SH ones in the layout of the parameters); opacity_logits comes in
// holding d/d opacity (from the blend backward).
struct GaussianGrads {
  float* means;
  float* log_scales;
  float* quats;
  float* opacity_logits;
  ShView<float> sh;
};

// The screen-space low-pass filter: `dilation` (px^2) is added to the 2D covariance's diagonal
// (3DGS and gsplat: 0.3; Mip-Splatting's 2D filter: 0.1); antialiased: the opacity times
// Mip-Splatting's compensation (preprocess.cu aa_compensation), which conic_opacity then holds.
struct Filter2D {
  float dilation = COV2D_DILATION;
  bool antialiased = false;
};

// intersect: INTERSECT_* (config.h). The backward writes every gradient of every Gaussian,
// zeros included, so only the blend's accumulated ones (means2d, conic, opacity, colours, and
// depths: dL/dz, null without rasterizer.depth) need a cleared buffer.
void launch_preprocess(int n, const GaussianParams& g, int degree, const Camera& cam, int intersect,
                       Filter2D filter, PreprocessOut out, cudaStream_t stream);

void launch_preprocess_backward(int n, const GaussianParams& g, int degree, const Camera& cam, Filter2D filter,
                                const int* radii,
                                const float* grad_means2d, const float* grad_conic, const float* grad_colors,
                                const float* grad_depths, GaussianGrads grads, cudaStream_t stream);

// ---- binning.cu -------------------------------------------------------------------------
// offsets[i] = touched[0] + ... + touched[i], in 64 bits (cub scan).
size_t scan_temp_bytes(int n);
void pair_offsets(void* temp, size_t temp_bytes, const int* touched, int64_t* offsets, int n,
                  cudaStream_t stream);
// Keys tile << 32 | depth bits, one per (Gaussian, tile) pair, on the tiles preprocess counted;
// pairs at or past `capacity` (the buffers' size) are dropped.
void launch_duplicate(int n, const float* means2d, const float* conic_opacity, const int* radii,
                      const float* depths, const int64_t* offsets, const Camera& cam, int intersect,
                      int64_t capacity, uint64_t* keys, int32_t* values, cudaStream_t stream);
// Bytes of temporary storage the radix sort needs for `num_pairs`.
size_t sort_temp_bytes(int num_pairs, int end_bit);
void sort_pairs(void* temp, size_t temp_bytes, const uint64_t* keys_in, uint64_t* keys_out,
                const int32_t* values_in, int32_t* values_out, int num_pairs, int end_bit,
                cudaStream_t stream);
// ranges [tiles, 2]: start/end of each tile's run of sorted keys (zeroed by the caller); keys
// of tile num_tiles mark unused slots.
void launch_tile_ranges(int num_pairs, int num_tiles, const uint64_t* sorted_keys, int* ranges,
                        cudaStream_t stream);
// order [tiles]: the tiles, longest list first (roughly: lengths within a quarter octave tie).
void launch_tile_order(int num_tiles, const int* ranges, int* order, cudaStream_t stream);

// ---- backward.cu: the exact fp32 backward every blend variant shares ----------------------
struct BlendBackwardArgs {
  const int* ranges;
  const int* tile_order;    // as BlendArgs
  const int32_t* point_list;
  const float* means2d;
  const float* conic_opacity;
  const float* colors;
  const float* background;  // [3]
  const float* final_T;     // [H,W]
  const int* n_contrib;     // [H,W]
  const float* grad_image;  // [3,H,W]
  const float* grad_alpha;  // [H,W] (alpha = 1 - final T)
  float* grad_means2d;      // [N,2] (accumulated)
  float* grad_conic;        // [N,3]
  float* grad_opacity;      // [N]
  float* grad_colors;       // [N,3]
  int width, height, tiles_x, tiles_y;
  int split = 1;  // exact backward: blocks per tile side, as BlendArgs::split
  float* grad_means2d_abs = nullptr;  // [N,2] or null (absgrad, exact backward only): AbsGS's sum
                                      // over pixels of |d L_pixel / d means2d| (accumulated)
  // depth (with options.depth and a gradient for it; blend.h BLEND_CHANNELS):
  const float* depths = nullptr;      // [N] view-space z
  const float* grad_depth = nullptr;  // [H,W] dL/d(sum_i w_i z_i)
  float* grad_depths = nullptr;       // [N] dL/dz (accumulated)
};
// Profiling probes (issue 20's study, where ncu cannot read counters): the blend backward with
// a part left out, so a time difference is that part's cost. The gradients are then wrong.
//   PROBE_NO_ATOMICS: everything but the atomic adds;  PROBE_WALK: only the back-to-front walk
//   and each pair's values (no warp sums, staging, mma or atomics).
enum BackwardProbe { PROBE_NONE = 0, PROBE_NO_ATOMICS = 1, PROBE_WALK = 2 };
// split: blocks per tile side (1, or 2: four blocks of four rows a tile, for images of few tiles,
// where one block a tile leaves SMs idle while each walks a long list).
void launch_blend_backward(const BlendBackwardArgs& args, int probe, cudaStream_t stream);
// backward_gemm.cu: the same gradients with the per-Gaussian sums as tensor-core GEMMs;
// split: dL/dpower as two tf32 terms (else one, rounded).
void launch_blend_backward_gemm(const BlendBackwardArgs& args, bool split, int probe, cudaStream_t stream);
