// Stage 1 and its backward: projection, EWA 2D covariance, radius, tiles touched, SH colour.
// Mirrors gsexp/render/reference/preprocess.py operation by operation. The decisions (radius,
// tile rectangle) use IEEE division and sqrt, so --use_fast_math does not move them.
#include <type_traits>

#include "kernels.h"
#include "common.cuh"
#include "intersect.cuh"
#include "sh.cuh"

namespace {

__device__ inline void quat_to_rotmat(const float* q, float R[3][3]) {
  float w = q[0], x = q[1], y = q[2], z = q[3];  // unit quaternion
  R[0][0] = 1 - 2 * (y * y + z * z); R[0][1] = 2 * (x * y - w * z); R[0][2] = 2 * (x * z + w * y);
  R[1][0] = 2 * (x * y + w * z); R[1][1] = 1 - 2 * (x * x + z * z); R[1][2] = 2 * (y * z - w * x);
  R[2][0] = 2 * (x * z - w * y); R[2][1] = 2 * (y * z + w * x); R[2][2] = 1 - 2 * (x * x + y * y);
}

// The activations the reference applies in Python (exp, F.normalize), fused here so a render
// launches no extra kernels: scale = exp(log_scale), q = raw / max(|raw|, 1e-12).
__device__ inline void activate(const float* log_scale, const float* raw_q, float s[3], float q[4],
                                float* q_norm) {
  for (int j = 0; j < 3; ++j) s[j] = expf(log_scale[j]);
  float norm = fmaxf(sqrtf(raw_q[0] * raw_q[0] + raw_q[1] * raw_q[1] + raw_q[2] * raw_q[2] + raw_q[3] * raw_q[3]),
                     1e-12f);
  for (int j = 0; j < 4; ++j) q[j] = raw_q[j] / norm;
  *q_norm = norm;
}

__device__ inline float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// Everything the forward computes that the backward needs again.
struct Projection {
  float t[3];         // view-space point
  float tx, ty;       // the point the EWA Jacobian is taken at (clamped to 1.3 x fov)
  bool clamp_x, clamp_y;
  float T[2][3];      // J W
  float R[3][3], s[3], q[4], q_norm;  // activated scale and unit quaternion
  float Sigma[3][3];  // 3D covariance
  float a, b, c;      // 2D covariance, dilated
  float a0, c0;       // its diagonal before the dilation (antialiased)
};

__device__ inline bool project(const Camera& cam, const float* p, const float* log_scale,
                               const float* raw_quat, float dilation, Projection& P) {
  const float* v = cam.view;
  for (int r = 0; r < 3; ++r) P.t[r] = v[4 * r] * p[0] + v[4 * r + 1] * p[1] + v[4 * r + 2] * p[2] + v[4 * r + 3];
  float z = P.t[2];
  if (!(z > NEAR_PLANE)) return false;
  float lim_x = FOV_CLAMP * cam.tan_x, lim_y = FOV_CLAMP * cam.tan_y;
  float ux = P.t[0] / z, uy = P.t[1] / z;
  P.clamp_x = ux < -lim_x || ux > lim_x;
  P.clamp_y = uy < -lim_y || uy > lim_y;
  P.tx = fminf(fmaxf(ux, -lim_x), lim_x) * z;
  P.ty = fminf(fmaxf(uy, -lim_y), lim_y) * z;
  float j00 = cam.fx / z, j02 = -cam.fx * P.tx / (z * z);
  float j11 = cam.fy / z, j12 = -cam.fy * P.ty / (z * z);
  for (int j = 0; j < 3; ++j) {
    P.T[0][j] = j00 * v[j] + j02 * v[8 + j];
    P.T[1][j] = j11 * v[4 + j] + j12 * v[8 + j];
  }
  activate(log_scale, raw_quat, P.s, P.q, &P.q_norm);
  quat_to_rotmat(P.q, P.R);
  float M[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) M[i][j] = P.R[i][j] * P.s[j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) P.Sigma[i][j] = M[i][0] * M[j][0] + M[i][1] * M[j][1] + M[i][2] * M[j][2];
  float TS[2][3];
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j)
      TS[r][j] = P.T[r][0] * P.Sigma[0][j] + P.T[r][1] * P.Sigma[1][j] + P.T[r][2] * P.Sigma[2][j];
  P.a0 = TS[0][0] * P.T[0][0] + TS[0][1] * P.T[0][1] + TS[0][2] * P.T[0][2];
  P.b = TS[0][0] * P.T[1][0] + TS[0][1] * P.T[1][1] + TS[0][2] * P.T[1][2];
  P.c0 = TS[1][0] * P.T[1][0] + TS[1][1] * P.T[1][1] + TS[1][2] * P.T[1][2];
  P.a = P.a0 + dilation;
  P.c = P.c0 + dilation;
  return true;
}

// antialiased (Mip-Splatting's 2D filter): the opacity is multiplied by
// sqrt(det S / det(S + dilation I)), S the undilated covariance, so the dilated Gaussian keeps
// S's mass; 0 where det S <= 0. As reference/preprocess.py's aa_compensation.
__device__ inline float aa_compensation(const Projection& P) {
  const float det0 = P.a0 * P.c0 - P.b * P.b, det = P.a * P.c - P.b * P.b;
  return det0 > 0.f ? sqrtf(det0 / det) : 0.f;
}

// Its gradient: g (dL/d compensation) onto the 2D covariance entries ga, gb, gc (the dilation
// is a constant shift). d comp = comp / 2 (d det0 / det0 - d det / det).
__device__ inline void aa_compensation_backward(const Projection& P, float comp, float g, float& ga, float& gb,
                                                float& gc) {
  const float det0 = P.a0 * P.c0 - P.b * P.b, det = P.a * P.c - P.b * P.b;
  if (!(det0 > 0.f)) return;
  const float h = 0.5f * comp * g;
  ga += h * (P.c0 / det0 - P.c / det);
  gc += h * (P.a0 / det0 - P.a / det);
  gb += h * (2.f * P.b / det - 2.f * P.b / det0);
}

__device__ inline void view_dir(const Camera& cam, const float* p, float* d, float* inv_norm) {
  float v[3] = {p[0] - cam.cam_pos[0], p[1] - cam.cam_pos[1], p[2] - cam.cam_pos[2]};
  float norm = fmaxf(sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), 1e-12f);
  *inv_norm = 1.f / norm;
  for (int k = 0; k < 3; ++k) d[k] = v[k] / norm;
}

// Block sizes: the forward's, and the backward's (smaller, so that the shared memory a block
// holds leaves room for several per SM).
constexpr int BLOCK = 256, BACKWARD_BLOCK = 128;

// A block's rows of one SH array in shared memory. One thread per Gaussian reading its own row
// from global memory strides a row (up to 180 B) between neighbouring threads, so a warp's load
// or store touches 32 sectors for 128 useful bytes; copied a row per warp it coalesces. Rows sit
// at an odd pitch, so threads reading their own rows hit distinct banks.
struct ShStage {
  float* s;
  int len, pitch;  // floats copied per row, shared stride
  __device__ float* row(int r) const { return s + r * pitch; }
};

__host__ __device__ inline int odd_pitch(int len) { return len | 1; }

// Rows [0, rows) of `g` (a row every `stride` floats) into the stage, or back out.
__device__ inline void stage_in(const ShStage& st, const float* g, int stride, int rows) {
  for (int r = threadIdx.x / 32; r < rows; r += blockDim.x / 32)
    for (int c = threadIdx.x % 32; c < st.len; c += 32) st.s[r * st.pitch + c] = g[(int64_t)r * stride + c];
}
__device__ inline void stage_out(const ShStage& st, float* g, int stride, int rows) {
  for (int r = threadIdx.x / 32; r < rows; r += blockDim.x / 32)
    for (int c = threadIdx.x % 32; c < st.len; c += 32) g[(int64_t)r * stride + c] = st.s[r * st.pitch + c];
}

// The floats of a rest row that degree DEGREE reads.
template <int DEGREE>
__host__ __device__ constexpr int rest_used() { return 3 * ((DEGREE + 1) * (DEGREE + 1) - 1); }

// Where thread `t` finds its SH coefficients after staging: its own rows, as Gaussian 0.
template <typename T>
__device__ inline ShView<T> staged_view(const ShStage& dc, const ShStage& rest, int t, int rest_len) {
  return {dc.row(t), rest.row(t), 0, 0, rest_len};
}

// Writes every output of every Gaussian (zeros when culled), so the buffers need no memset.
template <int DEGREE>
__global__ void preprocess_kernel(int n, const float* __restrict__ means,
                                  const float* __restrict__ log_scales, const float* __restrict__ quats,
                                  const float* __restrict__ opacity_logits, ShView<const float> sh,
                                  Camera cam, int intersect, Filter2D filter, PreprocessOut out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* p = means + 3 * i;
  Projection P;
  bool in_front = project(cam, p, log_scales + 3 * i, quats + 4 * i, filter.dilation, P);
  out.depths[i] = P.t[2];
  float det = P.a * P.c - P.b * P.b;
  float mx = 0.f, my = 0.f, radius = 0.f;
  float4 co = make_float4(0.f, 0.f, 0.f, 0.f);
  int touched = 0;
  if (in_front && det > 0.f) {
    mx = cam.fx * P.t[0] / P.t[2] + cam.cx - 0.5f;
    my = cam.fy * P.t[1] / P.t[2] + cam.cy - 0.5f;
    float mid = 0.5f * (P.a + P.c);
    float root = __fsqrt_rn(fmaxf(mid * mid - det, 0.1f));
    radius = ceilf(3.f * __fsqrt_rn(mid + root));
    const float o = sigmoid(opacity_logits[i]);
    co = make_float4(__fdiv_rn(P.c, det), __fdiv_rn(-P.b, det), __fdiv_rn(P.a, det),
                     filter.antialiased ? o * aa_compensation(P) : o);
    int x0, y0, x1, y1;
    Ellipse e;
    if (intersect == INTERSECT_AABB) {
      tile_rect(mx, my, radius, cam.tiles_x, cam.tiles_y, x0, y0, x1, y1);
      touched = max((x1 - x0) * (y1 - y0), 0);
    } else if (ellipse_of(mx, my, co, e) && snug_rect(e, cam.width, cam.height, x0, y0, x1, y1)) {
      touched = intersect == INTERSECT_SNUGBOX ? (x1 - x0) * (y1 - y0)
                                               : accutile(e, cam.width, cam.height, x0, y0, x1, y1, [](int, int) {});
    }
  }
  float rgb[3] = {0.f, 0.f, 0.f};
  if (touched > 0) {
    float d[3], inv_norm;
    view_dir(cam, p, d, &inv_norm);
    float basis[MAX_SH_BASES];
    sh_basis<DEGREE>(d[0], d[1], d[2], basis);
    constexpr int k_used = (DEGREE + 1) * (DEGREE + 1);
#pragma unroll
    for (int ch = 0; ch < 3; ++ch) {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < k_used; ++k) acc += basis[k] * sh.at(i, k, ch);
      rgb[ch] = fmaxf(acc + 0.5f, 0.f);
    }
  } else {
    mx = my = 0.f;
    radius = 0.f;
    co = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  for (int ch = 0; ch < 3; ++ch) out.colors[3 * i + ch] = rgb[ch];
  reinterpret_cast<float2*>(out.means2d)[i] = make_float2(mx, my);
  reinterpret_cast<float4*>(out.conic_opacity)[i] = co;
  out.radii[i] = (int)radius;
  out.tiles_touched[i] = touched;
}

// One visible Gaussian's gradients with respect to the raw parameters: log scales,
// unnormalised quaternions and opacity logits (g_opacity comes in per opacity from the blend
// backward and leaves per logit). Its SH coefficients are row `row` of `coeffs`, their
// gradients go to the same row of `g_sh`, which may be the same memory (each value is read
// before its gradient is written). Bands above DEGREE are not written. DEPTH: g_depths holds
// dL/dz of the view-space depth (rasterizer.depth), which reaches the mean through the view's
// third row (a template argument, so the kernel without it is the one it always was).
template <int DEGREE, bool DEPTH>
__device__ inline void backward_one(
    int i, const float* __restrict__ means, const float* __restrict__ log_scales,
    const float* __restrict__ quats, const float* __restrict__ opacity_logits,
    ShView<const float> coeffs, int row, const Camera& cam, Filter2D filter, const float* __restrict__ g_means2d,
    const float* __restrict__ g_conic, const float* __restrict__ g_colors, const float* __restrict__ g_depths,
    float* g_means, float* g_log_scales, float* g_quats, float* g_opacity, ShView<float> g_sh) {
  const float* p = means + 3 * i;
  Projection P;
  project(cam, p, log_scales + 3 * i, quats + 4 * i, filter.dilation, P);
  float o = sigmoid(opacity_logits[i]);
  const float g_o = g_opacity[i];  // per the opacity the blend read (compensated when antialiased)
  const float comp = filter.antialiased ? aa_compensation(P) : 1.f;
  g_opacity[i] = filter.antialiased ? g_o * comp * (o * (1.f - o)) : g_o * (o * (1.f - o));
  const float a = P.a, b = P.b, c = P.c, z = P.t[2];
  // conic = (c, -b, a) / det  ->  d/d(a, b, c) of the 2D covariance
  float det = a * c - b * b, den = det * det;
  float gA = g_conic[3 * i], gB = g_conic[3 * i + 1], gC = g_conic[3 * i + 2];
  float ga = (-c * c * gA + b * c * gB - b * b * gC) / den;
  float gb = (2 * b * c * gA - (a * c + b * b) * gB + 2 * a * b * gC) / den;
  float gc = (-b * b * gA + a * b * gB - a * a * gC) / den;
  if (filter.antialiased) aa_compensation_backward(P, comp, g_o * o, ga, gb, gc);
  // cov = T Sigma T^T, with b read from cov[0][1] only: Gs = G + G^T.
  float Gs[2][2] = {{2 * ga, gb}, {gb, 2 * gc}};
  float GT[2][3];  // Gs T
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) GT[r][j] = Gs[r][0] * P.T[0][j] + Gs[r][1] * P.T[1][j];
  float dSigma[3][3];  // T^T Gs T
  for (int i3 = 0; i3 < 3; ++i3)
    for (int j = 0; j < 3; ++j) dSigma[i3][j] = P.T[0][i3] * GT[0][j] + P.T[1][i3] * GT[1][j];
  float dT[2][3];  // Gs T Sigma
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j)
      dT[r][j] = GT[r][0] * P.Sigma[0][j] + GT[r][1] * P.Sigma[1][j] + GT[r][2] * P.Sigma[2][j];

  // Sigma = M M^T, M = R diag(s): dM = dSigma M (dSigma is symmetric).
  float M[3][3], dM[3][3];
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 3; ++j) M[r][j] = P.R[r][j] * P.s[j];
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 3; ++j) dM[r][j] = dSigma[r][0] * M[0][j] + dSigma[r][1] * M[1][j] + dSigma[r][2] * M[2][j];
  float dR[3][3];
  for (int j = 0; j < 3; ++j) {  // d/d log s = s d/ds
    g_log_scales[3 * i + j] = P.s[j] * (P.R[0][j] * dM[0][j] + P.R[1][j] * dM[1][j] + P.R[2][j] * dM[2][j]);
    for (int r = 0; r < 3; ++r) dR[r][j] = dM[r][j] * P.s[j];
  }
  float w = P.q[0], x = P.q[1], y = P.q[2], qz = P.q[3];
  float gq[4];  // d/d unit quaternion, then through the normalisation
  gq[0] = 2 * (-qz * dR[0][1] + y * dR[0][2] + qz * dR[1][0] - x * dR[1][2] - y * dR[2][0] + x * dR[2][1]);
  gq[1] = 2 * (y * dR[0][1] + qz * dR[0][2] + y * dR[1][0] - 2 * x * dR[1][1] - w * dR[1][2] +
                            qz * dR[2][0] + w * dR[2][1] - 2 * x * dR[2][2]);
  gq[2] = 2 * (-2 * y * dR[0][0] + x * dR[0][1] + w * dR[0][2] + x * dR[1][0] + qz * dR[1][2] -
                            w * dR[2][0] + qz * dR[2][1] - 2 * y * dR[2][2]);
  gq[3] = 2 * (-2 * qz * dR[0][0] - w * dR[0][1] + x * dR[0][2] + w * dR[1][0] - 2 * qz * dR[1][1] +
                            y * dR[1][2] + x * dR[2][0] + y * dR[2][1]);
  float q_dot = P.q[0] * gq[0] + P.q[1] * gq[1] + P.q[2] * gq[2] + P.q[3] * gq[3];
  for (int j = 0; j < 4; ++j) g_quats[4 * i + j] = (gq[j] - P.q[j] * q_dot) / P.q_norm;

  // T = J W  ->  dJ = dT W^T; J depends on z and on the clamped (tx, ty).
  const float* v = cam.view;
  float dJ00 = dT[0][0] * v[0] + dT[0][1] * v[1] + dT[0][2] * v[2];
  float dJ02 = dT[0][0] * v[8] + dT[0][1] * v[9] + dT[0][2] * v[10];
  float dJ11 = dT[1][0] * v[4] + dT[1][1] * v[5] + dT[1][2] * v[6];
  float dJ12 = dT[1][0] * v[8] + dT[1][1] * v[9] + dT[1][2] * v[10];
  float z2 = z * z, z3 = z2 * z;
  float dt[3] = {0.f, 0.f, 0.f};
  dt[2] += -cam.fx / z2 * dJ00 + 2 * cam.fx * P.tx / z3 * dJ02;
  dt[2] += -cam.fy / z2 * dJ11 + 2 * cam.fy * P.ty / z3 * dJ12;
  float dtx = -cam.fx / z2 * dJ02, dty = -cam.fy / z2 * dJ12;
  if (P.clamp_x) dt[2] += (P.tx / z) * dtx; else dt[0] += dtx;
  if (P.clamp_y) dt[2] += (P.ty / z) * dty; else dt[1] += dty;
  // means2d = (fx x / z + cx - 0.5, fy y / z + cy - 0.5)
  float gmx = g_means2d[2 * i], gmy = g_means2d[2 * i + 1];
  dt[0] += cam.fx / z * gmx;
  dt[1] += cam.fy / z * gmy;
  dt[2] += -cam.fx * P.t[0] / z2 * gmx - cam.fy * P.t[1] / z2 * gmy;
  if constexpr (DEPTH) dt[2] += g_depths[i];  // z = t[2]
  float gp[3];
  for (int j = 0; j < 3; ++j) gp[j] = v[j] * dt[0] + v[4 + j] * dt[1] + v[8 + j] * dt[2];

  // colour = max(sum_k basis_k(dir) sh_k + 0.5, 0), dir = normalize(p - camera centre);
  // like torch, the clamp passes gradient only where its input is > 0
  float d[3], inv_norm;
  view_dir(cam, p, d, &inv_norm);
  float basis[MAX_SH_BASES], bx[MAX_SH_BASES], by[MAX_SH_BASES], bz[MAX_SH_BASES];
  sh_basis<DEGREE>(d[0], d[1], d[2], basis);
  sh_basis_grad<DEGREE>(d[0], d[1], d[2], bx, by, bz);
  constexpr int k_used = (DEGREE + 1) * (DEGREE + 1);
  float g[3];
#pragma unroll
  for (int ch = 0; ch < 3; ++ch) {
    float raw = 0.f;
#pragma unroll
    for (int k = 0; k < k_used; ++k) raw += basis[k] * coeffs.at(row, k, ch);
    g[ch] = (raw + 0.5f > 0.f) ? g_colors[3 * i + ch] : 0.f;
  }
  float gd[3] = {0.f, 0.f, 0.f};
#pragma unroll
  for (int k = 0; k < k_used; ++k) {
    float s = 0.f;
#pragma unroll
    for (int ch = 0; ch < 3; ++ch) {
      const float v = coeffs.at(row, k, ch);
      g_sh.at(row, k, ch) = basis[k] * g[ch];
      s += v * g[ch];
    }
    gd[0] += s * bx[k];
    gd[1] += s * by[k];
    gd[2] += s * bz[k];
  }
  float dot = d[0] * gd[0] + d[1] * gd[1] + d[2] * gd[2];
  for (int j = 0; j < 3; ++j) g_means[3 * i + j] = gp[j] + (gd[j] - d[j] * dot) * inv_norm;
}

// Writes every gradient of every Gaussian (zeros when culled, and for bands above DEGREE), so
// the caller clears only what the blend accumulates. A block's SH rows come through shared
// memory a row per warp, their gradients are computed there in place and go back the same way:
// one thread per row in global memory would scatter its 48 loads and stores 180 B apart.
template <int DEGREE, bool DEPTH>
__global__ void preprocess_backward_kernel(
    int n, const float* __restrict__ means, const float* __restrict__ log_scales,
    const float* __restrict__ quats, const float* __restrict__ opacity_logits,
    ShView<const float> sh, Camera cam, Filter2D filter, const int* __restrict__ radii,
    const float* __restrict__ g_means2d, const float* __restrict__ g_conic,
    const float* __restrict__ g_colors, float* g_means, float* g_log_scales, float* g_quats,
    float* g_opacity, ShView<float> g_sh, const float* __restrict__ g_depths) {
  extern __shared__ float smem[];
  const int t = threadIdx.x, i0 = blockIdx.x * blockDim.x, i = i0 + t, rows = min((int)blockDim.x, n - i0);
  const ShStage dc{smem, 3, 3}, rest{smem + 3 * blockDim.x, sh.rest_len, odd_pitch(sh.rest_len)};
  stage_in(dc, sh.dc + (int64_t)i0 * sh.dc_stride, sh.dc_stride, rows);
  stage_in(rest, sh.rest + (int64_t)i0 * sh.rest_stride, sh.rest_stride, rows);
  __syncthreads();
  float* dc_row = dc.row(t);
  float* rest_row = rest.row(t);
  if (i < n && radii[i] > 0) {
    const ShView<float> mine = staged_view<float>(dc, rest, t, sh.rest_len);
    backward_one<DEGREE, DEPTH>(i, means, log_scales, quats, opacity_logits,
                                {mine.dc, mine.rest, 0, 0, mine.rest_len}, 0, cam, filter, g_means2d, g_conic,
                                g_colors, g_depths, g_means, g_log_scales, g_quats, g_opacity, mine);
    for (int c = rest_used<DEGREE>(); c < rest.len; ++c) rest_row[c] = 0.f;
  } else if (i < n) {
    for (int c = 0; c < 3; ++c) dc_row[c] = 0.f;
    for (int c = 0; c < rest.len; ++c) rest_row[c] = 0.f;
    for (int j = 0; j < 3; ++j) g_means[3 * i + j] = g_log_scales[3 * i + j] = 0.f;
    for (int j = 0; j < 4; ++j) g_quats[4 * i + j] = 0.f;
  }
  __syncthreads();
  stage_out(dc, g_sh.dc + (int64_t)i0 * g_sh.dc_stride, g_sh.dc_stride, rows);
  stage_out(rest, g_sh.rest + (int64_t)i0 * g_sh.rest_stride, g_sh.rest_stride, rows);
}

}  // namespace

// tests/preprocess_host.cpp compiles the kernels above for the CPU, without these launchers.
#ifndef GSEXP_HOST_KERNELS

// Calls f(std::integral_constant<int, D>{}) for D = degree, so each kernel has one instantiation
// per degree. The degree is 0..3: rasterize_forward checks it (ext.cpp).
template <typename F>
void with_degree(int degree, F f) {
  switch (degree) {
    case 0: f(std::integral_constant<int, 0>{}); break;
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    default: f(std::integral_constant<int, 3>{}); break;
  }
}

// Shared memory of a backward block: its DC rows and each rest row (at most 45 floats: ext.cpp
// takes at most 16 bases), 25 KB.
static size_t stage_bytes(int rest_len) { return sizeof(float) * BACKWARD_BLOCK * (3 + odd_pitch(rest_len)); }

void launch_preprocess(int n, const GaussianParams& g, int degree, const Camera& cam, int intersect,
                       Filter2D filter, PreprocessOut out, cudaStream_t stream) {
  if (n == 0) return;
  with_degree(degree, [&](auto d) {
    preprocess_kernel<decltype(d)::value><<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(
        n, g.means, g.log_scales, g.quats, g.opacity_logits, g.sh, cam, intersect, filter, out);
  });
}

void launch_preprocess_backward(int n, const GaussianParams& g, int degree, const Camera& cam, Filter2D filter,
                                const int* radii,
                                const float* grad_means2d, const float* grad_conic, const float* grad_colors,
                                const float* grad_depths, GaussianGrads grads, cudaStream_t stream) {
  if (n == 0) return;
  with_degree(degree, [&](auto d) {
    auto kernel = grad_depths ? preprocess_backward_kernel<decltype(d)::value, true>
                              : preprocess_backward_kernel<decltype(d)::value, false>;
    kernel<<<(n + BACKWARD_BLOCK - 1) / BACKWARD_BLOCK, BACKWARD_BLOCK, stage_bytes(g.sh.rest_len), stream>>>(
        n, g.means, g.log_scales, g.quats, g.opacity_logits, g.sh, cam, filter, radii, grad_means2d, grad_conic,
        grad_colors, grads.means, grads.log_scales, grads.quats, grads.opacity_logits, grads.sh, grad_depths);
  });
}

#endif  // GSEXP_HOST_KERNELS
