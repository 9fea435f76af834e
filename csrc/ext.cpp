// One C++ entry point per direction: runs the stages in order on torch's current stream,
// with every buffer from torch's allocator and one host sync (the number of pairs).
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "blend.h"
#include "kernels.h"
#include "train_ops.h"
#include "train_ops_adam.h"

namespace {

using Stages = std::map<std::string, double>;

// CUDA events between stages, only when asked for (reading them costs a sync).
class StageTimer {
 public:
  StageTimer(bool on, cudaStream_t stream) : on_(on), stream_(stream) {
    if (on_) mark("");
  }
  ~StageTimer() {
    for (auto& e : events_) cudaEventDestroy(e.second);
  }
  void mark(const std::string& stage) {
    if (!on_) return;
    cudaEvent_t e;
    C10_CUDA_CHECK(cudaEventCreate(&e));
    C10_CUDA_CHECK(cudaEventRecord(e, stream_));
    events_.emplace_back(stage, e);
  }
  Stages read() {
    Stages out;
    if (!on_) return out;
    C10_CUDA_CHECK(cudaEventSynchronize(events_.back().second));
    for (size_t i = 1; i < events_.size(); ++i) {
      float ms = 0.f;
      C10_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1].second, events_[i].second));
      out[events_[i].first] += ms;
    }
    return out;
  }

 private:
  bool on_;
  cudaStream_t stream_;
  std::vector<std::pair<std::string, cudaEvent_t>> events_;
};

void check_input(const torch::Tensor& t, const char* name, std::vector<int64_t> shape,
                 torch::ScalarType dtype = torch::kFloat32) {
  TORCH_CHECK(t.is_cuda(), "gsexp cuda rasterizer: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == dtype, "gsexp cuda rasterizer: ", name,
              " must be ", dtype, ", got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), "gsexp cuda rasterizer: ", name, " must be contiguous");
  TORCH_CHECK(t.dim() == (int64_t)shape.size(), "gsexp cuda rasterizer: ", name, " has shape ",
              t.sizes(), ", expected ", shape.size(), " dimensions");
  for (size_t i = 0; i < shape.size(); ++i)
    TORCH_CHECK(shape[i] < 0 || t.size(i) == shape[i], "gsexp cuda rasterizer: ", name,
                " has shape ", t.sizes(), ", dimension ", i, " should be ", shape[i]);
}

// camera: 12 view entries (rows of [R | t]), fx, fy, cx, cy, tan_x, tan_y, centre (3), width, height
Camera make_camera(const std::vector<double>& c) {
  TORCH_CHECK(c.size() == 23, "gsexp cuda rasterizer: camera needs 23 values, got ", c.size());
  Camera cam;
  for (int i = 0; i < 12; ++i) cam.view[i] = (float)c[i];
  cam.fx = (float)c[12]; cam.fy = (float)c[13]; cam.cx = (float)c[14]; cam.cy = (float)c[15];
  cam.tan_x = (float)c[16]; cam.tan_y = (float)c[17];
  for (int i = 0; i < 3; ++i) cam.cam_pos[i] = (float)c[18 + i];
  cam.width = (int)c[21]; cam.height = (int)c[22];
  TORCH_CHECK(cam.width > 0 && cam.height > 0, "gsexp cuda rasterizer: image size must be positive, got ",
              cam.width, "x", cam.height);
  cam.tiles_x = (cam.width + TILE_SIZE - 1) / TILE_SIZE;
  cam.tiles_y = (cam.height + TILE_SIZE - 1) / TILE_SIZE;
  return cam;
}

int bit_width(int64_t v) {
  int bits = 0;
  while (v > 0) { ++bits; v >>= 1; }
  return bits;
}

// The options' ids and combinations, checked once here for every caller.
void check_options(const RasterOptions& o) {
  TORCH_CHECK(o.blend >= BLEND_VANILLA && o.blend <= BLEND_TCGS, "gsexp cuda rasterizer: unknown blend id ", o.blend);
  TORCH_CHECK(o.precision >= PREC_FP32 && o.precision <= PREC_FP16, "gsexp cuda rasterizer: unknown precision id ",
              o.precision);
  TORCH_CHECK(o.blend != BLEND_VANILLA || o.precision == PREC_FP32, "gsexp cuda rasterizer: the vanilla blend is fp32");
  TORCH_CHECK(!o.half_blend || o.blend == BLEND_TCGS, "gsexp cuda rasterizer: half_blend applies to the tcgs blend");
  TORCH_CHECK(o.batch == 32 || o.batch == 64 || o.batch == 128,
              "gsexp cuda rasterizer: batch must be 32, 64 or 128, got ", o.batch);
  TORCH_CHECK(o.intersect >= INTERSECT_AABB && o.intersect <= INTERSECT_ACCUTILE,
              "gsexp cuda rasterizer: unknown intersect id ", o.intersect);
  TORCH_CHECK(o.backward >= BACKWARD_EXACT && o.backward <= BACKWARD_GEMM_TF32,
              "gsexp cuda rasterizer: unknown backward id ", o.backward);
}

// bench.py's modes like gemm_tf32@walk: the blend backward with a part left out, for timing by
// difference. Set by set_backward_probe from experiments and tests only; training leaves it at none.
// An unknown id is refused (false) and changes nothing: a C++ throw from here, or from the
// backward over an unknown id, crashed the H200's Python (2026-12-04), so there is none to make.
int backward_probe = PROBE_NONE;

bool set_backward_probe(int probe) {
  if (probe < PROBE_NONE || probe > PROBE_WALK) return false;
  backward_probe = probe;
  return true;
}

// The blocks per tile side of the exact blend backward and the matrix blends, from
// options.tile_split: 1, 2, or 0 (auto): 2 for images of fewer tiles than 4 per SM. Lego at 1/4
// size has 169 tiles, a few dozen holding its whole list, and there its backward took twice a
// full-size one's (H100, experiments/fast_recipes); four blocks a tile spread those lists over
// more SMs.
int blocks_per_tile_side(int tile_split, int tiles) {
  if (tile_split) return tile_split;
  static int sms = 0;  // the first device's: a process trains on one
  if (!sms) {
    int device = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  }
  return tiles < 4 * sms ? 2 : 1;
}

// Blocks take tiles longest list first, so the heavy tiles do not start in the last wave and
// leave SMs idle at the end of the kernel (longest-processing-time-first scheduling). The
// forward returns the order and the backward reuses it. Undefined: raster order.
torch::Tensor tile_order(const torch::Tensor& ranges, bool heavy_first, cudaStream_t stream) {
  if (!heavy_first) return torch::Tensor();
  auto order = torch::empty({ranges.size(0)}, ranges.options());
  launch_tile_order((int)ranges.size(0), ranges.data_ptr<int>(), order.data_ptr<int>(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return order;
}

const int* data_or_null(const torch::Tensor& t) { return t.defined() ? t.data_ptr<int>() : nullptr; }

int num_bases(const torch::Tensor& sh, const std::optional<torch::Tensor>& sh_rest) {
  return (int)(sh_rest ? 1 + sh_rest->size(1) : sh.size(1));
}

// sh: [N, bases, 3], or with sh_rest the DC term [N,1,3] and sh_rest [N, bases - 1, 3].
GaussianParams params(const torch::Tensor& means, const torch::Tensor& log_scales, const torch::Tensor& quats,
                      const torch::Tensor& opacity_logits, const torch::Tensor& sh,
                      const std::optional<torch::Tensor>& sh_rest) {
  const int64_t n = means.size(0);
  check_input(means, "means", {n, 3});
  check_input(log_scales, "log_scales", {n, 3});
  check_input(quats, "quats", {n, 4});
  check_input(opacity_logits, "opacity_logits", {n});
  if (!sh_rest) {
    check_input(sh, "sh", {n, -1, 3});
    TORCH_CHECK(sh.size(1) >= 1, "gsexp cuda rasterizer: sh needs at least the DC coefficient");
  } else {
    check_input(sh, "sh (the DC term)", {n, 1, 3});
    check_input(*sh_rest, "sh_rest", {n, -1, 3});
  }
  // the preprocess backward holds a block's rows in shared memory sized for degree 3
  TORCH_CHECK(num_bases(sh, sh_rest) <= MAX_SH_BASES, "gsexp cuda rasterizer: at most ", MAX_SH_BASES,
              " SH coefficients per Gaussian (degree 3), the Gaussians have ", num_bases(sh, sh_rest));
  const float* dc = sh.data_ptr<float>();
  const int joined = (int)sh.size(1) * 3, rest = sh_rest ? (int)sh_rest->size(1) * 3 : joined - 3;
  const ShView<const float> view = sh_rest ? ShView<const float>{dc, sh_rest->data_ptr<float>(), 3, rest, rest}
                                           : ShView<const float>{dc, dc + 3, joined, joined, rest};
  return {means.data_ptr<float>(), log_scales.data_ptr<float>(), quats.data_ptr<float>(),
          opacity_logits.data_ptr<float>(), view};
}

}  // namespace

// sh_rest: optional, see params(). means2d: an [N,2] buffer the projected means are written into
// (the caller's gradient holder). capacity: 0 reads the pair count back (a host sync); > 0 sizes
// the pair buffers instead (no sync).
// hit_counts: an optional [N] int32 the vanilla blend adds each Gaussian's contributed pixels to;
// hit_mask: an optional [H,W] uint8, then only the pixels where it is nonzero count.
// With options.depth the last output is sum_i w_i z_i [H,W] (undefined without it).
std::tuple<std::vector<torch::Tensor>, Stages> rasterize_forward(
    torch::Tensor means, torch::Tensor log_scales, torch::Tensor quats, torch::Tensor opacity_logits,
    torch::Tensor sh, std::optional<torch::Tensor> sh_rest, torch::Tensor means2d, int64_t degree,
    std::vector<double> camera, torch::Tensor background, const RasterOptions& options, int64_t capacity,
    std::optional<torch::Tensor> hit_counts, std::optional<torch::Tensor> hit_mask) {
  const int64_t n = means.size(0);
  const GaussianParams g = params(means, log_scales, quats, opacity_logits, sh, sh_rest);
  check_input(means2d, "means2d", {n, 2});
  check_input(background, "background", {3});
  const int bases = num_bases(sh, sh_rest);
  TORCH_CHECK(degree >= 0 && degree <= 3 && (degree + 1) * (degree + 1) <= bases,
              "gsexp cuda rasterizer: sh_degree ", degree, " needs ", (degree + 1) * (degree + 1),
              " SH coefficients, the Gaussians have ", bases);
  check_options(options);
  const int mode = options.intersect;
  int* hits = nullptr;
  if (hit_counts) {
    TORCH_CHECK(options.blend == BLEND_VANILLA, "gsexp cuda rasterizer: hit counts come from the vanilla blend");
    TORCH_CHECK(!options.depth, "gsexp cuda rasterizer: hit counts come from a blend without depth");
    check_input(*hit_counts, "hit_counts", {n}, torch::kInt32);
    hits = hit_counts->data_ptr<int>();
  }
  const Camera cam = make_camera(camera);
  TORCH_CHECK(!hit_mask || hit_counts, "gsexp cuda rasterizer: a hit mask needs hit counts");
  if (hit_mask) check_input(*hit_mask, "hit_mask", {cam.height, cam.width}, torch::kUInt8);
  const c10::cuda::OptionalCUDAGuard guard(device_of(means));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  auto f32 = means.options();
  auto i32 = f32.dtype(torch::kInt32);
  StageTimer timer(options.timing, stream);

  auto conic_opacity = torch::empty({n, 4}, f32);  // preprocess writes every entry
  auto colors = torch::empty({n, 3}, f32);
  auto depths = torch::empty({n}, f32);
  auto radii = torch::empty({n}, i32);
  auto touched = torch::empty({n}, i32);
  launch_preprocess((int)n, g, (int)degree, cam, mode, {options.dilation, options.antialiased},
                    {means2d.data_ptr<float>(), conic_opacity.data_ptr<float>(), colors.data_ptr<float>(),
                     depths.data_ptr<float>(), radii.data_ptr<int>(), touched.data_ptr<int>()},
                    stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  timer.mark("preprocess");

  auto offsets = torch::empty({n}, f32.dtype(torch::kInt64));
  if (n > 0) {
    const size_t scan_bytes = scan_temp_bytes((int)n);
    auto scan_temp = torch::empty({(int64_t)scan_bytes}, f32.dtype(torch::kUInt8));
    pair_offsets(scan_temp.data_ptr(), scan_bytes, touched.data_ptr<int>(), offsets.data_ptr<int64_t>(), (int)n,
                 stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const int num_tiles = cam.tiles_x * cam.tiles_y;
  const int end_bit = 32 + bit_width(num_tiles);
  // The pair count is read back (the one host sync), unless the caller gives a capacity: then the
  // buffers hold that many pairs, unused slots sort last, pairs past it are dropped, and the count
  // stays on the device for the caller to check later.
  auto count = n > 0 ? offsets.narrow(0, n - 1, 1) : torch::zeros({1}, offsets.options());
  const int64_t num_pairs = capacity > 0 ? capacity : count.item<int64_t>();
  // int pair indices; the last 256 below 2^31 would wrap the ranges' block count (n + 255) / 256
  TORCH_CHECK(num_pairs <= INT32_MAX - 256, "gsexp cuda rasterizer: ", num_pairs,
              " (tile, Gaussian) pairs exceed the limit of 2^31 - 257; render at a lower resolution");
  const int64_t unused_key = ((int64_t)num_tiles << 32) | 0xFFFFFFFFLL;  // sorts after every pair
  auto keys = capacity > 0 ? torch::full({num_pairs}, unused_key, f32.dtype(torch::kInt64))
                           : torch::empty({num_pairs}, f32.dtype(torch::kInt64));
  auto values = torch::empty({num_pairs}, i32);
  launch_duplicate((int)n, means2d.data_ptr<float>(), conic_opacity.data_ptr<float>(), radii.data_ptr<int>(),
                   depths.data_ptr<float>(), offsets.data_ptr<int64_t>(), cam, mode, num_pairs,
                   reinterpret_cast<uint64_t*>(keys.data_ptr<int64_t>()), values.data_ptr<int32_t>(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  timer.mark("duplicate");

  auto sorted_keys = torch::empty_like(keys);
  auto point_list = torch::empty_like(values);
  if (num_pairs > 0) {
    size_t temp_bytes = sort_temp_bytes((int)num_pairs, end_bit);
    auto temp = torch::empty({(int64_t)temp_bytes}, f32.dtype(torch::kUInt8));
    sort_pairs(temp.data_ptr(), temp_bytes, reinterpret_cast<uint64_t*>(keys.data_ptr<int64_t>()),
               reinterpret_cast<uint64_t*>(sorted_keys.data_ptr<int64_t>()), values.data_ptr<int32_t>(),
               point_list.data_ptr<int32_t>(), (int)num_pairs, end_bit, stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  timer.mark("sort");

  auto ranges = torch::zeros({num_tiles, 2}, i32);
  launch_tile_ranges((int)num_pairs, num_tiles, reinterpret_cast<uint64_t*>(sorted_keys.data_ptr<int64_t>()),
                     ranges.data_ptr<int>(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  timer.mark("ranges");

  auto image = torch::empty({3, cam.height, cam.width}, f32);
  auto final_T = torch::empty({cam.height, cam.width}, f32);
  auto n_contrib = torch::empty({cam.height, cam.width}, i32);
  const auto order = tile_order(ranges, options.heavy_first, stream);
  BlendArgs args{ranges.data_ptr<int>(), data_or_null(order), point_list.data_ptr<int32_t>(), means2d.data_ptr<float>(),
                 conic_opacity.data_ptr<float>(), colors.data_ptr<float>(), background.data_ptr<float>(),
                 cam.width, cam.height, cam.tiles_x, cam.tiles_y,
                 image.data_ptr<float>(), final_T.data_ptr<float>(), n_contrib.data_ptr<int>(), hits, options};
  const auto depth = options.depth ? torch::empty({cam.height, cam.width}, f32) : torch::Tensor();
  if (options.depth) {
    args.depths = depths.data_ptr<float>();
    args.depth = depth.data_ptr<float>();
  }
  if (hit_mask) args.hit_mask = hit_mask->data_ptr<uint8_t>();
  args.split = blocks_per_tile_side(options.tile_split, cam.tiles_x * cam.tiles_y);
  if (options.blend == BLEND_VANILLA) launch_blend_vanilla(args, stream);
  else launch_blend_matrix(args, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  timer.mark("blend");

  return {{image, final_T, n_contrib, conic_opacity, colors, depths, radii, point_list, ranges, order, count, depth},
          timer.read()};
}

std::tuple<std::vector<torch::Tensor>, Stages> rasterize_backward(
    torch::Tensor means, torch::Tensor log_scales, torch::Tensor quats, torch::Tensor opacity_logits,
    torch::Tensor sh, std::optional<torch::Tensor> sh_rest, int64_t degree, std::vector<double> camera,
    torch::Tensor background, torch::Tensor radii, torch::Tensor means2d,
    torch::Tensor conic_opacity, torch::Tensor colors, torch::Tensor point_list, torch::Tensor ranges,
    std::optional<torch::Tensor> order, torch::Tensor final_T, torch::Tensor n_contrib, torch::Tensor grad_image,
    torch::Tensor grad_alpha, const RasterOptions& options, std::optional<torch::Tensor> depths,
    std::optional<torch::Tensor> grad_depth) {
  const int64_t n = means.size(0);
  const GaussianParams g = params(means, log_scales, quats, opacity_logits, sh, sh_rest);
  const Camera cam = make_camera(camera);
  check_input(grad_image, "grad_image", {3, cam.height, cam.width});
  check_input(grad_alpha, "grad_alpha", {cam.height, cam.width});
  const c10::cuda::OptionalCUDAGuard guard(device_of(means));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  auto f32 = means.options();
  StageTimer timer(options.timing, stream);

  // Every gradient is a slice of one allocation. The blend backward accumulates the first four
  // (means2d, conic, opacity, colours), so they start at zero; the preprocess backward writes
  // every value of the rest.
  const int64_t sh_numel = sh.numel() + (sh_rest ? sh_rest->numel() : 0);
  // Each slice starts on 16 bytes, so the fused Adam takes every gradient a float4 at a time.
  const int64_t total = n * (2 + 3 + 1 + 3 + 3 + 3 + 4) + sh_numel + 4 * 9;
  auto grads = torch::empty({total}, f32);
  int64_t offset = 0;
  auto slice = [&](std::vector<int64_t> shape) {
    int64_t size = 1;
    for (int64_t d : shape) size *= d;
    offset = (offset + 3) / 4 * 4;
    auto t = grads.narrow(0, offset, size).view(shape);
    offset += size;
    return t;
  };
  auto grad_means2d = slice({n, 2});
  auto grad_conic = slice({n, 3});
  auto grad_opacity = slice({n});
  auto grad_colors = slice({n, 3});
  grads.narrow(0, 0, offset).zero_();
  const torch::Tensor tiles = order ? *order : torch::Tensor();  // the forward's order
  BlendBackwardArgs args{ranges.data_ptr<int>(), data_or_null(tiles), point_list.data_ptr<int32_t>(), means2d.data_ptr<float>(),
                         conic_opacity.data_ptr<float>(), colors.data_ptr<float>(),
                         background.data_ptr<float>(), final_T.data_ptr<float>(), n_contrib.data_ptr<int>(),
                         grad_image.data_ptr<float>(), grad_alpha.data_ptr<float>(),
                         grad_means2d.data_ptr<float>(), grad_conic.data_ptr<float>(),
                         grad_opacity.data_ptr<float>(), grad_colors.data_ptr<float>(), cam.width,
                         cam.height, cam.tiles_x, cam.tiles_y};
  check_options(options);
  TORCH_CHECK(!options.absgrad || options.backward == BACKWARD_EXACT,
              "gsexp cuda rasterizer: absgrad needs the exact backward");
  auto grad_means2d_abs = options.absgrad ? torch::zeros({n, 2}, f32) : torch::Tensor();
  if (options.absgrad) args.grad_means2d_abs = grad_means2d_abs.data_ptr<float>();
  // depth: only with a gradient for it; without one its term is zero and the plain kernels run.
  TORCH_CHECK(!grad_depth || (options.depth && depths), "gsexp cuda rasterizer: a depth gradient needs "
              "options.depth and the forward's depths");
  auto grad_depths = grad_depth ? torch::zeros({n}, f32) : torch::Tensor();
  if (grad_depth) {
    check_input(*depths, "depths", {n});
    check_input(*grad_depth, "grad_depth", {cam.height, cam.width});
    args.depths = depths->data_ptr<float>();
    args.grad_depth = grad_depth->data_ptr<float>();
    args.grad_depths = grad_depths.data_ptr<float>();
  }
  const int probe = backward_probe;
  args.split = blocks_per_tile_side(options.tile_split, args.tiles_x * args.tiles_y);
  if (options.backward == BACKWARD_EXACT)
    launch_blend_backward(args, probe, stream);
  else
    launch_blend_backward_gemm(args, options.backward == BACKWARD_GEMM_FP32, probe, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();

  auto grad_means = slice({n, 3});
  auto grad_log_scales = slice({n, 3});
  auto grad_quats = slice({n, 4});
  auto grad_sh = slice(sh.sizes().vec());
  auto grad_rest = sh_rest ? slice(sh_rest->sizes().vec()) : torch::Tensor();
  float* dc = grad_sh.data_ptr<float>();  // the gradients in the parameters' layout
  const ShView<float> grad_view{dc, sh_rest ? grad_rest.data_ptr<float>() : dc + 3, g.sh.dc_stride, g.sh.rest_stride,
                                g.sh.rest_len};
  launch_preprocess_backward((int)n, g, (int)degree, cam, {options.dilation, options.antialiased}, radii.data_ptr<int>(),
                             grad_means2d.data_ptr<float>(),
                             grad_conic.data_ptr<float>(), grad_colors.data_ptr<float>(),
                             grad_depth ? grad_depths.data_ptr<float>() : nullptr,
                             {grad_means.data_ptr<float>(), grad_log_scales.data_ptr<float>(),
                              grad_quats.data_ptr<float>(), grad_opacity.data_ptr<float>(), grad_view},
                             stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  timer.mark("backward");
  // grad_opacity now holds d/d logit; the last: absgrad's sums (undefined without it)
  return {{grad_means, grad_log_scales, grad_quats, grad_opacity, grad_sh, grad_rest, grad_means2d, grad_means2d_abs},
          timer.read()};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<RasterOptions> options(m, "RasterOptions");
  options.def(py::init<>());
#define BIND_RASTER_OPTION(type, name, value) options.def_readwrite(#name, &RasterOptions::name);
  RASTER_OPTIONS(BIND_RASTER_OPTION)  // every field of blend.h's list, by its name
#undef BIND_RASTER_OPTION
  // The ids of the option enums, so Python never restates them.
  m.attr("blend_ids") = py::dict(py::arg("vanilla") = (int)BLEND_VANILLA, py::arg("gemm") = (int)BLEND_GEMM,
                                 py::arg("tcgs") = (int)BLEND_TCGS);
  m.attr("precision_ids") = py::dict(py::arg("fp32") = (int)PREC_FP32, py::arg("tf32") = (int)PREC_TF32,
                                     py::arg("fp16") = (int)PREC_FP16);
  m.attr("backward_ids") = py::dict(py::arg("exact") = (int)BACKWARD_EXACT,
                                    py::arg("gemm_fp32") = (int)BACKWARD_GEMM_FP32,
                                    py::arg("gemm_tf32") = (int)BACKWARD_GEMM_TF32);
  m.attr("intersect_ids") = py::dict(py::arg("aabb") = (int)INTERSECT_AABB, py::arg("snugbox") = (int)INTERSECT_SNUGBOX,
                                     py::arg("accutile") = (int)INTERSECT_ACCUTILE);
  // tile_split: blocks per tile side, as blocks_per_tile_side reads it (0: by the tile count)
  m.attr("tile_split_ids") = py::dict(py::arg("none") = 1, py::arg("quarters") = 2, py::arg("auto") = 0);
  m.def("rasterize_forward", &rasterize_forward, "gsexp: preprocess, duplicate, sort, ranges, blend");
  m.def("rasterize_backward", &rasterize_backward, "gsexp: the shared exact fp32 backward");
  m.def("set_backward_probe", &set_backward_probe, "gsexp: leave a part of the blend backward out (timing only); false for an unknown id");
  m.def("ssim_forward", &ssim_forward, "gsexp: fused SSIM (torchmetrics' window and padding) weighted with L1, value and partials",
        py::arg("img"), py::arg("ref"), py::arg("w_ssim") = 1.0, py::arg("w_l1") = 0.0, py::arg("w_constant") = 0.0);
  m.def("ssim_backward", &ssim_backward, "gsexp: the fused loss's gradient w.r.t. the image", py::arg("img"),
        py::arg("ref"), py::arg("partials"), py::arg("grad_out"), py::arg("w_ssim") = 1.0, py::arg("w_l1") = 0.0);
  m.def("pose_move_forward", &pose_move_forward, "gsexp: pose_opt's motion of the Gaussians for one camera");
  m.def("pose_move_backward", &pose_move_backward, "gsexp: its gradients (means, quats, the camera's 6 numbers)");
  m.def("bilateral_slice_forward", &bilateral_slice_forward, "gsexp: bilateral grid slice and transform of a render");
  m.def("bilateral_slice_backward", &bilateral_slice_backward, "gsexp: its gradients (image, grid)");
  m.def("bilateral_total_variation", &bilateral_total_variation, "gsexp: the grid's total variation and its gradient");
  m.def("densify_stats", &densify_stats, "gsexp: one step's densification statistics in one launch");
  m.def("fused_adam", &fused_adam, "gsexp: one Adam step for up to 8 tensors in one launch (optionally visible rows only)");
  m.attr("tile_size") = TILE_SIZE;
  m.attr("near_plane") = NEAR_PLANE;
  m.attr("cov2d_dilation") = COV2D_DILATION;
  m.attr("fov_clamp") = FOV_CLAMP;
  m.attr("alpha_max") = ALPHA_MAX;
  m.attr("alpha_min") = ALPHA_MIN;
  m.attr("log_alpha_min") = LOG_ALPHA_MIN;
  m.attr("t_min") = T_MIN;
}
