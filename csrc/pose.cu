// pose_opt's motion of the Gaussians (gsexp/train/pose.py): X' = A X + b and q' = q_A * q for one
// training camera's correction delta = (w, t), one launch forward and three backward (a memset,
// the per-Gaussian pass with its sums, the 6 numbers from the sums) where the torch ops were ~40,
// each a host dispatch in a step bound by the host (beer trained 1.9x slower with pose_opt).
// The motion's 6-number maths runs in double on one thread; the Gaussians' in float32.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "train_ops.h"
#include "warp.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kSums = 28;  // sum g' m^T (9), sum g' (3), sum gq' q^T (16)

struct Motion {
  double A[3][3], b[3];
  double q[4];     // A as a unit quaternion (w, x, y, z)
  double L[4][4];  // L(q) p = q * p
  double w[3], theta, s;
};

// R(q) of a quaternion as the quadratic form (not normalised: exact for unit q, and its
// polarisation gives the derivative below).
__device__ void rotation_of(const double q[4], double R[3][3]) {
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  R[0][0] = w * w + x * x - y * y - z * z; R[0][1] = 2 * (x * y - w * z); R[0][2] = 2 * (x * z + w * y);
  R[1][0] = 2 * (x * y + w * z); R[1][1] = w * w - x * x + y * y - z * z; R[1][2] = 2 * (y * z - w * x);
  R[2][0] = 2 * (x * z - w * y); R[2][1] = 2 * (y * z + w * x); R[2][2] = w * w - x * x - y * y + z * z;
}

__device__ void left_product(const double q[4], double L[4][4]) {
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  const double rows[4][4] = {{w, -x, -y, -z}, {x, w, -z, y}, {y, z, w, -x}, {z, -y, x, w}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) L[i][j] = rows[i][j];
}

// As pose.py's _motion: w = R^T delta_w (world axes), q = (cos(theta/2), sin(theta/2)/theta w),
// A = R(q), b = c - A c + R^T delta_t, with R^T = rot_t and c the camera centre.
__device__ Motion motion(const float* delta, const float* rot_t, const float* center) {
  Motion m;
  for (int i = 0; i < 3; ++i)
    m.w[i] = rot_t[3 * i] * (double)delta[0] + rot_t[3 * i + 1] * (double)delta[1] + rot_t[3 * i + 2] * (double)delta[2];
  m.theta = sqrt(m.w[0] * m.w[0] + m.w[1] * m.w[1] + m.w[2] * m.w[2]);
  const double half = 0.5 * m.theta;
  m.s = m.theta > 1e-8 ? sin(half) / m.theta : 0.5 - m.theta * m.theta / 48;
  m.q[0] = cos(half);
  for (int i = 0; i < 3; ++i) m.q[i + 1] = m.s * m.w[i];
  rotation_of(m.q, m.A);
  left_product(m.q, m.L);
  for (int i = 0; i < 3; ++i) {
    double v = center[i];
    for (int j = 0; j < 3; ++j) v += rot_t[3 * i + j] * (double)delta[3 + j] - m.A[i][j] * center[j];
    m.b[i] = v;
  }
  return m;
}

// The block's motion as floats in shared memory: A (9), b (3), L (16).
__device__ void load_motion(float* s, const float* delta, const float* rot_t, const float* center) {
  if (threadIdx.x == 0) {
    const Motion m = motion(delta, rot_t, center);
    for (int i = 0; i < 9; ++i) s[i] = (float)m.A[i / 3][i % 3];
    for (int i = 0; i < 3; ++i) s[9 + i] = (float)m.b[i];
    for (int i = 0; i < 16; ++i) s[12 + i] = (float)m.L[i / 4][i % 4];
  }
  __syncthreads();
}

__global__ void move_forward_kernel(int64_t n, const float* __restrict__ means, const float* __restrict__ quats,
                                    const float* delta, const float* rot_t, const float* center,
                                    float* __restrict__ means_out, float* __restrict__ quats_out) {
  __shared__ float s[28];
  load_motion(s, delta, rot_t, center);
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
    const float x[3] = {means[3 * k], means[3 * k + 1], means[3 * k + 2]};
    for (int i = 0; i < 3; ++i) means_out[3 * k + i] = s[9 + i] + s[3 * i] * x[0] + s[3 * i + 1] * x[1] + s[3 * i + 2] * x[2];
    const float p[4] = {quats[4 * k], quats[4 * k + 1], quats[4 * k + 2], quats[4 * k + 3]};
    for (int i = 0; i < 4; ++i)
      quats_out[4 * k + i] = s[12 + 4 * i] * p[0] + s[13 + 4 * i] * p[1] + s[14 + 4 * i] * p[2] + s[15 + 4 * i] * p[3];
  }
}

// Per Gaussian dL/dX = A^T g, dL/dq = L^T gq; and the sums the correction's gradient needs,
// reduced per warp, then per block in shared memory, then one atomic add per block and value.
__global__ void move_backward_kernel(int64_t n, const float* __restrict__ g_means, const float* __restrict__ g_quats,
                                     const float* __restrict__ means, const float* __restrict__ quats,
                                     const float* delta, const float* rot_t, const float* center,
                                     float* __restrict__ g_means_in, float* __restrict__ g_quats_in,
                                     float* __restrict__ sums) {
  __shared__ float s[28];
  __shared__ float block_sums[kSums];
  if (threadIdx.x < kSums) block_sums[threadIdx.x] = 0.f;
  load_motion(s, delta, rot_t, center);  // syncs
  float acc[kSums] = {};
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
    const float g[3] = {g_means[3 * k], g_means[3 * k + 1], g_means[3 * k + 2]};
    const float x[3] = {means[3 * k], means[3 * k + 1], means[3 * k + 2]};
    for (int j = 0; j < 3; ++j) g_means_in[3 * k + j] = g[0] * s[j] + g[1] * s[3 + j] + g[2] * s[6 + j];
    const float gq[4] = {g_quats[4 * k], g_quats[4 * k + 1], g_quats[4 * k + 2], g_quats[4 * k + 3]};
    const float q[4] = {quats[4 * k], quats[4 * k + 1], quats[4 * k + 2], quats[4 * k + 3]};
    for (int j = 0; j < 4; ++j)
      g_quats_in[4 * k + j] = gq[0] * s[12 + j] + gq[1] * s[16 + j] + gq[2] * s[20 + j] + gq[3] * s[24 + j];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) acc[3 * i + j] += g[i] * x[j];
      acc[9 + i] += g[i];
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[12 + 4 * i + j] += gq[i] * q[j];
  }
  for (int v = 0; v < kSums; ++v) {
    const float a = warp_sum(acc[v]);
    if (threadIdx.x % 32 == 0) atomicAdd(&block_sums[v], a);
  }
  __syncthreads();
  if (threadIdx.x < kSums) atomicAdd(&sums[threadIdx.x], block_sums[threadIdx.x]);
}

// dL/d(delta) from the sums, as pose.py's _Move.backward: b = c - A c + R^T t, A = R(q),
// q(w) with w = R^T delta_w. R(q) is quadratic in q, so dR/dq_k = (R(q + e_k) - R(q - e_k)) / 2,
// and L(q) is linear: dL/dq_k = L(e_k).
__global__ void move_delta_grad_kernel(const float* sums, const float* delta, const float* rot_t, const float* center,
                                       float* g_delta) {
  const Motion m = motion(delta, rot_t, center);
  double g_b[3], g_a[3][3];
  for (int i = 0; i < 3; ++i) g_b[i] = sums[9 + i];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) g_a[i][j] = sums[3 * i + j] - g_b[i] * center[j];
  double g_q[4];
  for (int k = 0; k < 4; ++k) {
    double plus[4], minus[4], e[4] = {0, 0, 0, 0}, Rp[3][3], Rm[3][3], Le[4][4];
    e[k] = 1;
    for (int i = 0; i < 4; ++i) plus[i] = m.q[i] + e[i], minus[i] = m.q[i] - e[i];
    rotation_of(plus, Rp);
    rotation_of(minus, Rm);
    left_product(e, Le);
    double v = 0;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) v += g_a[i][j] * 0.5 * (Rp[i][j] - Rm[i][j]);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) v += (double)sums[12 + 4 * i + j] * Le[i][j];
    g_q[k] = v;
  }
  // q = (cos(theta/2), s w): dq0/dw = -(s/2) w; d(s w)/dw = s I + k w w^T with k = s'(theta) / theta
  // = (cos(theta/2)/2 - s) / theta^2, which cancels near 0: there its series (as pose.py).
  const double t2 = m.theta * m.theta;
  const double k = m.theta < 0.3 ? t2 * (1.0 / 960 - t2 * (1.0 / 107520 - t2 / 23224320)) - 1.0 / 24
                                 : (m.q[0] * 0.5 - m.s) / t2;
  const double gv_w = g_q[1] * m.w[0] + g_q[2] * m.w[1] + g_q[3] * m.w[2];
  double g_w[3];
  for (int i = 0; i < 3; ++i) g_w[i] = m.s * g_q[i + 1] + (k * gv_w - 0.5 * m.s * g_q[0]) * m.w[i];
  for (int j = 0; j < 3; ++j) {  // w = R^T delta_w, b's R^T t: both through rot_t
    g_delta[j] = (float)(rot_t[j] * g_w[0] + rot_t[3 + j] * g_w[1] + rot_t[6 + j] * g_w[2]);
    g_delta[3 + j] = (float)(rot_t[j] * g_b[0] + rot_t[3 + j] * g_b[1] + rot_t[6 + j] * g_b[2]);
  }
}

void check(const torch::Tensor& t, const char* name, int64_t rows, int64_t cols) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), "gsexp pose_move: ", name,
              " must be a contiguous float32 CUDA tensor");
  TORCH_CHECK(rows < 0 ? t.numel() == cols : (t.dim() == 2 && t.size(0) == rows && t.size(1) == cols),
              "gsexp pose_move: ", name, " has the wrong shape");
}

// The model's and the camera's tensors both directions take.
void check_motion(const torch::Tensor& means, const torch::Tensor& quats, const torch::Tensor& delta,
                  const torch::Tensor& rot_t, const torch::Tensor& center) {
  const int64_t n = means.size(0);
  check(means, "means", n, 3);
  check(quats, "quats", n, 4);
  check(delta, "delta", -1, 6);
  check(rot_t, "rot_t", -1, 9);
  check(center, "center", -1, 3);
}

int blocks_for(int64_t n) {
  return (int)std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 1024));
}

}  // namespace

std::vector<torch::Tensor> pose_move_forward(torch::Tensor means, torch::Tensor quats, torch::Tensor delta,
                                             torch::Tensor rot_t, torch::Tensor center) {
  const int64_t n = means.size(0);
  check_motion(means, quats, delta, rot_t, center);
  const c10::cuda::CUDAGuard guard(means.device());
  auto means_out = torch::empty_like(means), quats_out = torch::empty_like(quats);
  move_forward_kernel<<<blocks_for(n), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      n, means.data_ptr<float>(), quats.data_ptr<float>(), delta.data_ptr<float>(), rot_t.data_ptr<float>(),
      center.data_ptr<float>(), means_out.data_ptr<float>(), quats_out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {means_out, quats_out};
}

std::vector<torch::Tensor> pose_move_backward(torch::Tensor g_means, torch::Tensor g_quats, torch::Tensor means,
                                              torch::Tensor quats, torch::Tensor delta, torch::Tensor rot_t,
                                              torch::Tensor center) {
  const int64_t n = means.size(0);
  check(g_means, "g_means", n, 3);
  check(g_quats, "g_quats", n, 4);
  check_motion(means, quats, delta, rot_t, center);
  const c10::cuda::CUDAGuard guard(means.device());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  auto g_means_in = torch::empty_like(g_means), g_quats_in = torch::empty_like(g_quats);
  auto sums = torch::zeros({kSums}, means.options());
  auto g_delta = torch::empty({6}, means.options());
  move_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      n, g_means.data_ptr<float>(), g_quats.data_ptr<float>(), means.data_ptr<float>(), quats.data_ptr<float>(),
      delta.data_ptr<float>(), rot_t.data_ptr<float>(), center.data_ptr<float>(), g_means_in.data_ptr<float>(),
      g_quats_in.data_ptr<float>(), sums.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  move_delta_grad_kernel<<<1, 1, 0, stream>>>(sums.data_ptr<float>(), delta.data_ptr<float>(), rot_t.data_ptr<float>(),
                                              center.data_ptr<float>(), g_delta.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {g_means_in, g_quats_in, g_delta};
}
