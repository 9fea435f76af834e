// The blend contract: every blend variant (vanilla, gemm_gs, tc_gs) reads the same sorted
// tile lists and per-Gaussian data and writes the same three outputs, so the shared
// backward is valid whichever variant ran the forward.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

// Operand formats of the matrix blends (fp32: the same dot products on CUDA cores).
enum { PREC_FP32 = 0, PREC_TF32 = 1, PREC_FP16 = 2 };

// Switches of the matrix blends (gemm_gs, tc_gs); the vanilla blend ignores them.
struct MatrixOptions {
  bool tcgs;        // TC-GS's beta = ln o + power (else GEMM-GS's power)
  bool g2l;         // tile-centred coordinates
  bool early_cull;  // tcgs: test beta against ln(1/255) before the exp
  bool half_blend;  // tcgs: T and colour held in fp16, as TC-GS's code
  int precision;    // PREC_*
  int batch;        // Gaussians per pipeline stage: 32, 64 or 128
};

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
  MatrixOptions matrix;
};

void launch_blend_vanilla(const BlendArgs& args, cudaStream_t stream);
void launch_blend_matrix(const BlendArgs& args, cudaStream_t stream);  // gemm_gs and tc_gs
