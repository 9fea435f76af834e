// Rasterizer constants: mirrors gsexp/render/constants.py (tests check the two agree).
#pragma once

#define GSEXP_TILE_SIZE 16
#define GSEXP_BLOCK_PIXELS (GSEXP_TILE_SIZE * GSEXP_TILE_SIZE)

constexpr int TILE_SIZE = GSEXP_TILE_SIZE;
constexpr int BLOCK_PIXELS = GSEXP_BLOCK_PIXELS;
constexpr float NEAR_PLANE = 0.2f;
constexpr float COV2D_DILATION = 0.3f;
constexpr float FOV_CLAMP = 1.3f;
constexpr float ALPHA_MAX = 0.99f;
constexpr float ALPHA_MIN = 1.0f / 255.0f;
constexpr float LOG_ALPHA_MIN = -5.541263545158426f;  // ln(1/255): TC-GS's EarlyCull threshold
constexpr float T_MIN = 1e-4f;
constexpr int MAX_SH_BASES = 16;  // degree 3
// Which tiles a Gaussian's entries go to (intersect.cuh): the 3-sigma square, the exact box
// of the alpha = 1/255 ellipse, or only the tiles that ellipse touches.
enum { INTERSECT_AABB = 0, INTERSECT_SNUGBOX = 1, INTERSECT_ACCUTILE = 2 };
// The blend formula of a variant: vanilla, GEMM-GS, TC-GS.
enum { BLEND_VANILLA = 0, BLEND_GEMM = 1, BLEND_TCGS = 2 };
// The blend backward: exact fp32, or the GEMM form on tensor cores (backward_gemm.cu) with
// dL/dpower split into two tf32 terms (about fp32's accuracy) or rounded to one.
enum { BACKWARD_EXACT = 0, BACKWARD_GEMM_FP32 = 1, BACKWARD_GEMM_TF32 = 2 };
constexpr double LEVEL_MARGIN = 1e-3;  // intersect.cuh: the 1/255 ellipse grows by this share,
constexpr double SPAN_MARGIN = 1e-3;   // and its spans by this many pixels (rounding never cuts a pixel)
