// The blend contract: every blend variant (vanilla, gemm_gs, tc_gs) reads the same sorted
// tile lists and per-Gaussian data and writes the same three outputs (four with depth), so the shared
// backward is valid whichever variant ran the forward.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "config.h"

// Operand formats of the matrix blends (fp32: the same dot products on CUDA cores).
enum { PREC_FP32 = 0, PREC_TF32 = 1, PREC_FP16 = 2 };

// Every switch of a rasterizer variant (gsexp/render/settings.py), filled once per settings
// object by gsexp/render/cuda (options_of) by name; the blends read the ones they have. One list,
// X(type, name, default): the struct below and its Python binding (ext.cpp) are both made from it,
// so a new switch is a line here, its setting in settings.py and conf/, and the kernel that reads it.
#define RASTER_OPTIONS(X)                                                                         \
  X(int, blend, BLEND_VANILLA)     /* BLEND_* */                                                  \
  X(int, precision, PREC_FP32)     /* PREC_*: operands of the matrix blends */                    \
  X(bool, g2l, true)               /* matrix blends: tile-centred coordinates */                  \
  X(bool, early_cull, true)        /* tc_gs: test beta against ln(1/255) before the exp */        \
  X(bool, half_blend, false)       /* tc_gs: T and colour held in fp16, as TC-GS's code */        \
  X(int, batch, 128)               /* matrix blends: Gaussians per pipeline stage (32, 64, 128) */ \
  X(int, intersect, INTERSECT_AABB)                                                               \
  X(int, backward, BACKWARD_EXACT) /* BACKWARD_*: the blend backward's kernel */                  \
  X(bool, heavy_first, true)       /* blocks take the longest tile lists first */                 \
  X(bool, timing, false)           /* CUDA events per stage (reading them syncs) */               \
  X(float, dilation, COV2D_DILATION) /* preprocess: px^2 added to the 2D covariance's diagonal */ \
  X(bool, antialiased, false)      /* preprocess: Mip-Splatting's opacity compensation */         \
  X(bool, absgrad, false)          /* exact backward: also AbsGS's sum of |per-pixel d/d means2d| */ \
  X(bool, depth, false)            /* blends: also sum_i w_i z_i per pixel (BlendArgs::depth) */  \
  X(int, tile_split, 1)            /* exact backward, matrix blends: blocks per tile side, 1 or 2; 0: by tile count */

struct RasterOptions {
#define RASTER_OPTION_FIELD(type, name, value) type name = value;
  RASTER_OPTIONS(RASTER_OPTION_FIELD)
#undef RASTER_OPTION_FIELD
};

// Channels a blend composites: the colour, and with depth the view-space z as a fourth one over
// a background of 0 (as reference/blend.py). A template argument of every blend and backward,
// so the kernels without depth are the ones they always were.
template <bool DEPTH>
constexpr int BLEND_CHANNELS = DEPTH ? 4 : 3;

struct BlendArgs {
  // read-only inputs
  const int* ranges;           // [tiles, 2]
  const int* tile_order;       // [tiles] the tile each block renders, or null for raster order
  const int32_t* point_list;   // [pairs] Gaussian ids sorted by (tile, depth)
  const float* means2d;        // [N,2] fp32 pixel coordinates
  const float* conic_opacity;  // [N,4]
  const float* colors;         // [N,3]
  const float* background;     // [3]
  int width, height, tiles_x, tiles_y;
  // outputs
  float* image;    // [3,H,W] with the background composited
  float* final_T;  // [H,W]
  int* n_contrib;  // [H,W] list position (1-based) of the last contributor
  int* hit_counts;  // [N] or null: pixels each Gaussian contributes to, added (vanilla only)
  RasterOptions options;
  // depth (last, so that the fields above keep their offsets in the kernels without it)
  const float* depths = nullptr;  // [N] view-space z, the fourth channel
  float* depth = nullptr;         // [H,W] sum_i w_i z_i, w_i = alpha_i T_i
  const uint8_t* hit_mask = nullptr;  // [H,W] or null: hit_counts counts only where nonzero (vanilla)
  int split = 1;  // matrix blends: blocks per tile side (options.tile_split, auto resolved by ext.cpp)
};

void launch_blend_vanilla(const BlendArgs& args, cudaStream_t stream);
void launch_blend_matrix(const BlendArgs& args, cudaStream_t stream);  // gemm_gs and tc_gs
