// The densification statistics of one training step in one launch: for each Gaussian the view
// saw (radius > 0), add the screen-space gradient's norm in NDC units, count the view and keep
// the largest radius. The same arithmetic as DefaultStrategy's torch ops (hypot, then add), which
// cost about ten launches a step.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "train_ops.h"

namespace {

__global__ void densify_stats_kernel(int64_t n, const float2* __restrict__ grad, const int* __restrict__ radii,
                                     float half_w, float half_h, float* __restrict__ grad2d,
                                     float* __restrict__ count, float* __restrict__ max_radii) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int r = radii[i];
  if (r <= 0) return;
  const float2 g = grad[i];
  grad2d[i] += hypotf(g.x * half_w, g.y * half_h);
  count[i] += 1.f;
  max_radii[i] = fmaxf(max_radii[i], (float)r);
}

void check(const torch::Tensor& t, const char* name, torch::ScalarType type, int64_t n, int64_t cols) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == type && t.is_contiguous(), "gsexp densify_stats: ", name,
              " must be a contiguous CUDA ", type, " tensor");
  TORCH_CHECK(t.size(0) == n && (cols == 0 ? t.dim() == 1 : t.dim() == 2 && t.size(1) == cols),
              "gsexp densify_stats: ", name, " has the wrong shape for ", n, " Gaussians");
}

}  // namespace

void densify_stats(torch::Tensor grad_means2d, torch::Tensor radii, double half_w, double half_h,
                   torch::Tensor grad2d, torch::Tensor count, torch::Tensor max_radii) {
  const int64_t n = radii.size(0);
  check(grad_means2d, "grad_means2d", torch::kFloat32, n, 2);
  check(radii, "radii", torch::kInt32, n, 0);
  check(grad2d, "grad2d", torch::kFloat32, n, 0);
  check(count, "count", torch::kFloat32, n, 0);
  check(max_radii, "max_radii", torch::kFloat32, n, 0);
  if (n == 0) return;
  const c10::cuda::CUDAGuard guard(radii.device());
  constexpr int threads = 256;
  densify_stats_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      n, reinterpret_cast<const float2*>(grad_means2d.data_ptr<float>()), radii.data_ptr<int>(), (float)half_w,
      (float)half_h, grad2d.data_ptr<float>(), count.data_ptr<float>(), max_radii.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
