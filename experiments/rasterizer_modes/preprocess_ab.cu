// Issue 38: csrc/preprocess.cu's forward and backward alone, on upstream gradients given from
// outside. No blend, so no atomics: two builds (the source from before the modes and the
// current one, each with -I its own csrc) must give the same bits, or differ only by how nvcc
// compiled the preprocess. preprocess_ab.py builds and runs it; GSEXP_FILTER2D marks the
// source whose launchers take a Filter2D (the current one).
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <cstddef>

#include "kernels.h"

namespace {

// The 23 values of gsexp/render/cuda/function.py: the camera's 21 floats in its field order, then
// width and height (ext.cpp's make_camera names them one by one; the layout is checked here).
Camera camera_of(const std::vector<double>& c) {
  static_assert(offsetof(Camera, width) == 21 * sizeof(float), "Camera: 21 floats, then the sizes");
  TORCH_CHECK(c.size() == 23, "preprocess_ab: camera needs 23 values, got ", c.size());
  Camera cam;
  float* fields = reinterpret_cast<float*>(&cam);
  for (int i = 0; i < 21; ++i) fields[i] = (float)c[i];
  cam.width = (int)c[21];
  cam.height = (int)c[22];
  cam.tiles_x = (cam.width + TILE_SIZE - 1) / TILE_SIZE;
  cam.tiles_y = (cam.height + TILE_SIZE - 1) / TILE_SIZE;
  return cam;
}

float* ptr(const torch::Tensor& t) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
              "preprocess_ab: every tensor must be contiguous float32 on the GPU");
  return t.data_ptr<float>();
}

}  // namespace

// sh: [N, bases, 3]. Upstream: dL/d means2d [N,2], conic [N,3], opacity [N], colours [N,3].
// Returns means2d, conic_opacity, colors, depths, radii (the forward, aabb intersect) and the
// gradients of means, log_scales, quats, opacity_logits and sh.
std::vector<torch::Tensor> run(torch::Tensor means, torch::Tensor log_scales, torch::Tensor quats,
                               torch::Tensor opacity_logits, torch::Tensor sh, int64_t degree,
                               std::vector<double> camera, torch::Tensor grad_means2d, torch::Tensor grad_conic,
                               torch::Tensor grad_opacity, torch::Tensor grad_colors) {
  const int64_t n = means.size(0);
  const Camera cam = camera_of(camera);
  const auto f32 = means.options(), i32 = means.options().dtype(torch::kInt32);
  const int joined = (int)sh.size(1) * 3;
  const GaussianParams g{ptr(means), ptr(log_scales), ptr(quats), ptr(opacity_logits),
                         ShView<const float>{ptr(sh), ptr(sh) + 3, joined, joined, joined - 3}};
  auto means2d = torch::empty({n, 2}, f32), conic_opacity = torch::empty({n, 4}, f32);
  auto colors = torch::empty({n, 3}, f32), depths = torch::empty({n}, f32);
  auto radii = torch::empty({n}, i32), touched = torch::empty({n}, i32);
  const PreprocessOut out{means2d.data_ptr<float>(), conic_opacity.data_ptr<float>(), colors.data_ptr<float>(),
                          depths.data_ptr<float>(), radii.data_ptr<int>(), touched.data_ptr<int>()};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
#ifdef GSEXP_FILTER2D
  launch_preprocess((int)n, g, (int)degree, cam, INTERSECT_AABB, Filter2D{}, out, stream);
#else
  launch_preprocess((int)n, g, (int)degree, cam, INTERSECT_AABB, out, stream);
#endif
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  auto d_means = torch::empty({n, 3}, f32), d_log_scales = torch::empty({n, 3}, f32);
  auto d_quats = torch::empty({n, 4}, f32), d_opacity = grad_opacity.clone(), d_sh = torch::empty_like(sh);
  const GaussianGrads grads{d_means.data_ptr<float>(), d_log_scales.data_ptr<float>(), d_quats.data_ptr<float>(),
                            d_opacity.data_ptr<float>(),
                            ShView<float>{d_sh.data_ptr<float>(), d_sh.data_ptr<float>() + 3, joined, joined, joined - 3}};
#ifdef GSEXP_FILTER2D
  launch_preprocess_backward((int)n, g, (int)degree, cam, Filter2D{}, radii.data_ptr<int>(), ptr(grad_means2d),
                             ptr(grad_conic), ptr(grad_colors), nullptr, grads, stream);
#else
  launch_preprocess_backward((int)n, g, (int)degree, cam, radii.data_ptr<int>(), ptr(grad_means2d),
                             ptr(grad_conic), ptr(grad_colors), grads, stream);
#endif
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {means2d, conic_opacity, colors, depths, radii, d_means, d_log_scales, d_quats, d_opacity, d_sh};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("run", &run, "preprocess forward + backward alone, on given upstream gradients");
}
