// appearance=bilateral_grid's slice and transform (gsexp/train/appearance.py): per pixel the
// render's luma, the photo's grid of 3x4 changes sampled trilinearly at (x, y, luma), and the
// render through identity + that change. One launch forward and one (plus the gradient's memset)
// backward, for the torch path's dozens of ops in a step bound by their dispatches (beer's grid
// step: 128 launches, 5.9 ms wall against 2.8 ms of kernels, 2026-12-07).
// Coordinates as grid_sample's (align_corners=True, border): pixel centres (x + 0.5) / W span the
// grid's x cells 0 .. GX-1, luma clamped to [0, 1] spans its levels 0 .. L-1.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "train_ops.h"
#include "warp.cuh"

namespace {

constexpr int kTile = 16;  // a block is 16 x 16 pixels; a warp two rows of 16
constexpr int kChannels = 12;
__constant__ float kLuma[3] = {0.299f, 0.587f, 0.114f};  // appearance.py's LUMA (Rec. 601)

struct Axis {  // one axis's cell pair and the weight of the upper one
  int lo, hi;
  float t;
};

__device__ Axis axis_of(float position, int cells) {  // position in cell units, inside [0, cells - 1]
  const int lo = min(max((int)floorf(position), 0), max(cells - 2, 0));
  return {lo, min(lo + 1, cells - 1), cells > 1 ? position - lo : 0.f};
}

struct Pixel {
  float rgb[3], luma_raw;
  float at[3];  // x, y, luma in cell units
  Axis x, y, z;
};

__device__ Pixel pixel_at(const float* image, int64_t hw, int64_t i, int px, int py, int w, int h, int gx, int gy,
                          int levels) {
  Pixel p;
  p.luma_raw = 0.f;
  for (int c = 0; c < 3; ++c) p.rgb[c] = image[c * hw + i], p.luma_raw += kLuma[c] * p.rgb[c];
  const float luma = fminf(fmaxf(p.luma_raw, 0.f), 1.f);
  p.at[0] = (px + 0.5f) / w * (gx - 1);
  p.at[1] = (py + 0.5f) / h * (gy - 1);
  p.at[2] = luma * (levels - 1);
  p.x = axis_of(p.at[0], gx);
  p.y = axis_of(p.at[1], gy);
  p.z = axis_of(p.at[2], levels);
  return p;
}

// The grid's value of channel c at the pixel, and its derivative along luma's cell axis.
__device__ void sample(const float* grid, const Pixel& p, int gx, int gy, int levels, int c, float& value,
                       float& d_z) {
  const int64_t plane = (int64_t)gy * gx;
  const float* g = grid + (int64_t)c * levels * plane;
  float at[2] = {0.f, 0.f};  // bilinear in x, y at the two luma levels
  const int zs[2] = {p.z.lo, p.z.hi};
  for (int k = 0; k < 2; ++k) {
    const float* s = g + zs[k] * plane;
    const float top = (1 - p.x.t) * s[p.y.lo * gx + p.x.lo] + p.x.t * s[p.y.lo * gx + p.x.hi];
    const float bottom = (1 - p.x.t) * s[p.y.hi * gx + p.x.lo] + p.x.t * s[p.y.hi * gx + p.x.hi];
    at[k] = (1 - p.y.t) * top + p.y.t * bottom;
  }
  value = (1 - p.z.t) * at[0] + p.z.t * at[1];
  d_z = at[1] - at[0];
}

__global__ void slice_forward_kernel(const float* __restrict__ image, const float* __restrict__ grid, int h, int w,
                                     int gx, int gy, int levels, float* __restrict__ out) {
  const int px = blockIdx.x * kTile + threadIdx.x % kTile, py = blockIdx.y * kTile + threadIdx.x / kTile;
  if (px >= w || py >= h) return;
  const int64_t hw = (int64_t)h * w, i = (int64_t)py * w + px;
  const Pixel p = pixel_at(image, hw, i, px, py, w, h, gx, gy, levels);
  float d[kChannels], unused;
  for (int c = 0; c < kChannels; ++c) sample(grid, p, gx, gy, levels, c, d[c], unused);
  for (int r = 0; r < 3; ++r)
    out[r * hw + i] = p.rgb[r] + d[4 * r] * p.rgb[0] + d[4 * r + 1] * p.rgb[1] + d[4 * r + 2] * p.rgb[2] + d[4 * r + 3];
}

__device__ float hat(float position, int cell) { return fmaxf(1.f - fabsf(position - cell), 0.f); }

// The grid's gradient: every pixel adds g_d[c] x its weight to the 8 cells around it. Neighbouring
// pixels share cells (a cell spans ~80 pixels of a 1280-wide photo on 16 cells), so a warp sums its
// pixels' shares per cell with shuffles and adds each channel once (lane c adds channel c). The
// cells walked are those between the warp's lowest and highest, in absolute indices, so pixels on
// either side of a cell boundary meet in one sum; cells no pixel touches are skipped.
__device__ void add_grid_grad(const float g_d[kChannels], const Pixel& p, bool live, int gx, int gy, int levels,
                              float* g_grid) {
  const unsigned all = 0xffffffffu;
  const Axis* axes[3] = {&p.x, &p.y, &p.z};
  int lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = __reduce_min_sync(all, live ? axes[a]->lo : 1 << 30);
    hi[a] = __reduce_max_sync(all, live ? axes[a]->hi : -1);
  }
  const int lane = threadIdx.x % 32;
  for (int z = lo[2]; z <= hi[2]; ++z) {
    const float wz = live ? hat(p.at[2], z) : 0.f;
    if (!__any_sync(all, wz > 0.f)) continue;
    for (int y = lo[1]; y <= hi[1]; ++y) {
      const float wzy = wz * hat(p.at[1], y);
      if (!__any_sync(all, wzy > 0.f)) continue;
      for (int x = lo[0]; x <= hi[0]; ++x) {
        const float weight = wzy * hat(p.at[0], x);
        if (!__any_sync(all, weight > 0.f)) continue;
        float mine = 0.f;
        for (int c = 0; c < kChannels; ++c) {
          const float total = warp_sum(g_d[c] * weight);
          if (lane == c) mine = total;
        }
        if (lane < kChannels) atomicAdd(&g_grid[(((int64_t)lane * levels + z) * gy + y) * gx + x], mine);
      }
    }
  }
}

// Per pixel: out_r = rgb_r + sum_j d[4r + j] rgb_j + d[4r + 3]. So dL/dd[4r + j] = g_r rgb_j
// (g_r for j = 3), dL/drgb_j = g_j + sum_r g_r d[4r + j] + dL/dluma x kLuma[j], where luma moves
// the sample along the grid's luma axis inside (0, 1) only (clamped, and grid_sample's border).
__global__ void slice_backward_kernel(const float* __restrict__ g_out, const float* __restrict__ image,
                                      const float* __restrict__ grid, int h, int w, int gx, int gy, int levels,
                                      float* __restrict__ g_image, float* __restrict__ g_grid) {
  const int px = blockIdx.x * kTile + threadIdx.x % kTile, py = blockIdx.y * kTile + threadIdx.x / kTile;
  const bool live = px < w && py < h;  // the rest take part in the warp's sums with nothing
  const int64_t hw = (int64_t)h * w, i = live ? (int64_t)py * w + px : 0;
  const Pixel p = pixel_at(image, hw, i, live ? px : 0, live ? py : 0, w, h, gx, gy, levels);
  float g_d[kChannels] = {};
  if (live) {
    float d[kChannels], d_z[kChannels];
    for (int c = 0; c < kChannels; ++c) sample(grid, p, gx, gy, levels, c, d[c], d_z[c]);
    float g[3], g_rgb[3], g_z = 0.f;
    for (int r = 0; r < 3; ++r) g[r] = g_out[r * hw + i];
    for (int r = 0; r < 3; ++r) {
      for (int j = 0; j < 3; ++j) g_d[4 * r + j] = g[r] * p.rgb[j];
      g_d[4 * r + 3] = g[r];
    }
    for (int c = 0; c < kChannels; ++c) g_z += g_d[c] * d_z[c];
    const float g_luma = p.luma_raw > 0.f && p.luma_raw < 1.f ? g_z * (levels - 1) : 0.f;
    for (int j = 0; j < 3; ++j) {
      g_rgb[j] = g[j] + g[0] * d[j] + g[1] * d[4 + j] + g[2] * d[8 + j] + g_luma * kLuma[j];
      g_image[j * hw + i] = g_rgb[j];
    }
  }
  add_grid_grad(g_d, p, live, gx, gy, levels, g_grid);
}

// The grid's total variation, as appearance.py's regularization: per axis of (L, GY, GX) with more
// than one cell, the mean over the grid's neighbour pairs of their squared difference, summed; and
// its gradient, gathered per cell from both its neighbours (no write conflicts). One block.
__global__ void total_variation_kernel(const float* __restrict__ grid, int levels, int gy, int gx,
                                       float* __restrict__ value, float* __restrict__ grad) {
  const int sizes[3] = {levels, gy, gx};
  const int64_t strides[3] = {(int64_t)gy * gx, gx, 1}, n = (int64_t)kChannels * levels * gy * gx;
  float pairs[3];  // pairs along each axis (0 when it has one cell)
  for (int a = 0; a < 3; ++a) pairs[a] = (float)(n / sizes[a] * (sizes[a] - 1));
  float sum = 0.f;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    float g = 0.f;
    for (int a = 0; a < 3; ++a) {
      if (sizes[a] < 2) continue;
      const int at = (int)(e / strides[a] % sizes[a]);
      if (at + 1 < sizes[a]) {
        const float up = grid[e + strides[a]] - grid[e];
        sum += up * up / pairs[a];
        g -= 2.f * up / pairs[a];
      }
      if (at > 0) g += 2.f * (grid[e] - grid[e - strides[a]]) / pairs[a];
    }
    grad[e] = g;
  }
  __shared__ float warps[32];
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0.f;
    sum = warp_sum(sum);
    if (threadIdx.x == 0) *value = sum;
  }
}

void check(const torch::Tensor& t, const char* name, int dims) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous() && t.dim() == dims,
              "gsexp bilateral_slice: ", name, " must be a contiguous float32 CUDA tensor of ", dims, " dims");
}

// image [3,H,W], grid [12,L,GY,GX]; g_out like image.
void check_all(const torch::Tensor& image, const torch::Tensor& grid, const torch::Tensor* g_out) {
  check(image, "image", 3);
  check(grid, "grid", 4);
  TORCH_CHECK(image.size(0) == 3 && grid.size(0) == kChannels, "gsexp bilateral_slice: image must be [3,H,W] and grid [12,L,GY,GX]");
  if (g_out) {
    check(*g_out, "g_out", 3);
    TORCH_CHECK(g_out->sizes() == image.sizes(), "gsexp bilateral_slice: g_out must be shaped as the image");
  }
}

dim3 tiles(const torch::Tensor& image) {
  return dim3((unsigned)((image.size(2) + kTile - 1) / kTile), (unsigned)((image.size(1) + kTile - 1) / kTile));
}

}  // namespace

torch::Tensor bilateral_slice_forward(torch::Tensor image, torch::Tensor grid) {
  check_all(image, grid, nullptr);
  const c10::cuda::CUDAGuard guard(image.device());
  auto out = torch::empty_like(image);
  if (image.numel() == 0) return out;
  slice_forward_kernel<<<tiles(image), kTile * kTile, 0, c10::cuda::getCurrentCUDAStream()>>>(
      image.data_ptr<float>(), grid.data_ptr<float>(), (int)image.size(1), (int)image.size(2), (int)grid.size(3),
      (int)grid.size(2), (int)grid.size(1), out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::vector<torch::Tensor> bilateral_slice_backward(torch::Tensor g_out, torch::Tensor image, torch::Tensor grid) {
  check_all(image, grid, &g_out);
  const c10::cuda::CUDAGuard guard(image.device());
  auto g_image = torch::empty_like(image), g_grid = torch::zeros_like(grid);
  if (image.numel() == 0) return {g_image, g_grid};
  slice_backward_kernel<<<tiles(image), kTile * kTile, 0, c10::cuda::getCurrentCUDAStream()>>>(
      g_out.data_ptr<float>(), image.data_ptr<float>(), grid.data_ptr<float>(), (int)image.size(1),
      (int)image.size(2), (int)grid.size(3), (int)grid.size(2), (int)grid.size(1), g_image.data_ptr<float>(),
      g_grid.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {g_image, g_grid};
}

std::vector<torch::Tensor> bilateral_total_variation(torch::Tensor grid) {
  check(grid, "grid", 4);
  TORCH_CHECK(grid.size(0) == kChannels, "gsexp bilateral_total_variation: grid must be [12,L,GY,GX]");
  const c10::cuda::CUDAGuard guard(grid.device());
  auto value = torch::zeros({}, grid.options()), grad = torch::empty_like(grid);
  total_variation_kernel<<<1, 1024, 0, c10::cuda::getCurrentCUDAStream()>>>(
      grid.data_ptr<float>(), (int)grid.size(1), (int)grid.size(2), (int)grid.size(3), value.data_ptr<float>(),
      grad.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {value, grad};
}
