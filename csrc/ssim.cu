// Fused SSIM for training, exactly torchmetrics' structural_similarity_index_measure with its
// defaults (11x11 Gaussian window, sigma 1.5, data_range 1, K1 0.01, K2 0.03): the images are
// reflect-padded by 5, filtered 'valid', and the SSIM map is averaged over every pixel (C*H*W,
// no border crop). One kernel per direction, one block per 32x32 tile of one channel; the
// separable filter runs in shared memory over the tile plus a 5-pixel halo. The kernels also
// take the mean |img - ref|, so that 3DGS's whole loss (1 - l) L1 + l (1 - SSIM) is one launch
// each way instead of a dozen small ones (the training step is bound by launches).
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>

#include "train_ops.h"

namespace {

constexpr int kRadius = 5;  // torchmetrics: window int(3.5 * sigma + 0.5) * 2 + 1 = 11 taps
constexpr int kTaps = 2 * kRadius + 1;
constexpr int kTileW = 32;  // output pixels per block: one warp per row, coalesced
constexpr int kTileH = 32;
constexpr int kRows = 4;  // outputs per thread, a column strip: each loaded row serves up to 4 taps
constexpr int kInW = kTileW + 2 * kRadius;  // tile plus halo
constexpr int kInH = kTileH + 2 * kRadius;
constexpr int kBlockH = kTileH / kRows;  // threads: 32 x 8
constexpr int kThreads = kTileW * kBlockH;
constexpr int kWarps = kThreads / 32;
constexpr float kC1 = 1e-4f;  // (K1 * data_range)^2
constexpr float kC2 = 9e-4f;  // (K2 * data_range)^2

// The value is ssim * mean S + l1 * mean |img - ref| + constant: weights (1, 0, 0) give SSIM
// itself, (-l, 1 - l, l) 3DGS's loss.
struct LossWeights {
  double ssim, l1, constant;
};

// exp(-d^2 / (2 * 1.5^2)) for d = -5..5, normalised in double and rounded: sums to 1 - 1.4e-9.
__constant__ float kGauss[kTaps] = {0.00102838012f, 0.00759875821f, 0.0360007733f, 0.109360687f,
                                    0.213005543f,   0.266011715f,   0.213005543f,  0.109360687f,
                                    0.0360007733f,  0.00759875821f, 0.00102838012f};

// torch's 'reflect' padding (edge not repeated). Positions past the pad (tiles reaching beyond
// the image) are clamped: they only feed outputs outside the image, which are discarded.
__device__ __forceinline__ int reflect(int p, int n) {
  p = p < 0 ? -p : p;
  p = p >= n ? 2 * (n - 1) - p : p;
  return min(max(p, 0), n - 1);
}

template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.y * kTileW + threadIdx.x) / 32;
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = 0;
  if (warp == 0) {
    v = lane < kWarps ? scratch[lane] : T(0);
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;  // valid in thread 0
}

// Forward. The moments are taken relative to the centre pixel of each window (the horizontal
// pass shifts by each row's centre, the vertical pass moves that to the output pixel): in flat
// regions E[x^2] - E[x]^2 then cancels small numbers, not ~1, keeping sigma^2 accurate next to
// C2 (this cuts the fp32 gradient error on real images from ~3e-4 to ~1e-5 of its maximum).
// Writes per pixel dS/dmu_x, dS/dE[x^2], dS/dE[xy] (holding the other filtered moments fixed)
// for the backward, and w.constant + w.ssim * mean S + w.l1 * mean |x - y| through per-block
// sums summed by the last block (fixed order: deterministic, no host sync).
__global__ void __launch_bounds__(kThreads)
    ssim_forward_kernel(const float* __restrict__ img, const float* __restrict__ ref, int C, int H, int W,
                        float* __restrict__ partials, double2* __restrict__ block_sums,
                        unsigned* __restrict__ done, float* __restrict__ out, double count, LossWeights w) {
  __shared__ float sx[kInH][kInW], sy[kInH][kInW];
  __shared__ float hs[5][kInH][kTileW];  // row sums: x, y, xx, yy, xy (centre-relative)
  __shared__ double scratch[kWarps];
  __shared__ bool last;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTileW + tx;
  const int x0 = blockIdx.x * kTileW, y0 = blockIdx.y * kTileH;
  const int64_t plane = (int64_t)H * W, base = blockIdx.z * plane;

  for (int i = tid; i < kInH * kInW; i += kThreads) {
    const int r = i / kInW, c = i % kInW;
    const int64_t g = base + (int64_t)reflect(y0 - kRadius + r, H) * W + reflect(x0 - kRadius + c, W);
    sx[r][c] = img[g];
    sy[r][c] = ref[g];
  }
  __syncthreads();

  for (int i = tid; i < kInH * kTileW; i += kThreads) {
    const int r = i / kTileW, c = i % kTileW;
    const float cx = sx[r][c + kRadius], cy = sy[r][c + kRadius];
    float mx = 0.f, my = 0.f, xx = 0.f, yy = 0.f, xy = 0.f;
#pragma unroll
    for (int k = 0; k < kTaps; ++k) {
      const float w = kGauss[k], dx = sx[r][c + k] - cx, dy = sy[r][c + k] - cy;
      const float wx = w * dx, wy = w * dy;
      mx += wx;
      my += wy;
      xx = fmaf(wx, dx, xx);
      yy = fmaf(wy, dy, yy);
      xy = fmaf(wx, dy, xy);
    }
    hs[0][r][c] = mx;
    hs[1][r][c] = my;
    hs[2][r][c] = xx;
    hs[3][r][c] = yy;
    hs[4][r][c] = xy;
  }
  __syncthreads();

  // Row r was centred on its own pixel: shifting it by d to an output pixel's value adds d to
  // its mean, d * (2 mean + d) to its E[x^2] and the cross terms to E[xy] (weights sum to 1).
  const int oy = ty * kRows;  // this thread's outputs: tile rows oy .. oy + kRows - 1, column tx
  float cx[kRows], cy[kRows], mx[kRows], my[kRows], xx[kRows], yy[kRows], xy[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    cx[j] = sx[oy + j + kRadius][tx + kRadius];
    cy[j] = sy[oy + j + kRadius][tx + kRadius];
    mx[j] = my[j] = xx[j] = yy[j] = xy[j] = 0.f;
  }
#pragma unroll
  for (int rr = 0; rr < kRows + 2 * kRadius; ++rr) {
    const int r = oy + rr;
    const float vx = sx[r][tx + kRadius], vy = sy[r][tx + kRadius];
    const float hx = hs[0][r][tx], hy = hs[1][r][tx], hxx = hs[2][r][tx], hyy = hs[3][r][tx], hxy = hs[4][r][tx];
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int k = rr - j;  // tap of row r for output j (compile-time after unrolling)
      if (k < 0 || k >= kTaps) continue;
      const float w = kGauss[k], dx = vx - cx[j], dy = vy - cy[j], ax = hx + dx, ay = hy + dy;
      mx[j] = fmaf(w, ax, mx[j]);
      my[j] = fmaf(w, ay, my[j]);
      xx[j] = fmaf(w, fmaf(dx, hx + ax, hxx), xx[j]);
      yy[j] = fmaf(w, fmaf(dy, hy + ay, hyy), yy[j]);
      xy[j] = fmaf(w, fmaf(dx, hy, fmaf(dy, ax, hxy)), xy[j]);
    }
  }

  const int px = x0 + tx;
  float s_sum = 0.f, l1_sum = 0.f;
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const float mu_x = cx[j] + mx[j], mu_y = cy[j] + my[j];
    const float var_x_raw = xx[j] - mx[j] * mx[j];
    const float var_x = fmaxf(var_x_raw, 0.f), var_y = fmaxf(yy[j] - my[j] * my[j], 0.f);
    const float cov = xy[j] - mx[j] * my[j];
    const float a = 2.f * mu_x * mu_y + kC1, b = 2.f * cov + kC2;
    const float c = mu_x * mu_x + mu_y * mu_y + kC1, d = var_x + var_y + kC2;
    const float inv_cd = 1.f / (c * d);
    const float s = a * b * inv_cd;
    // torch's clamp(min=0) passes the gradient where its input >= 0.
    const float ds_xx = var_x_raw >= 0.f ? -s / d : 0.f;
    const float ds_xy = 2.f * a * inv_cd;
    const float ds_mu = 2.f * mu_y * (b - a) * inv_cd - 2.f * mu_x * s / c - 2.f * mu_x * ds_xx;
    const int py = y0 + oy + j;
    if (px < W && py < H) {
      const int64_t o = base + (int64_t)py * W + px, map = (int64_t)C * plane;
      partials[o] = ds_mu;
      partials[o + map] = ds_xx;
      partials[o + 2 * map] = ds_xy;
      s_sum += s;
      l1_sum += fabsf(cx[j] - cy[j]);
    }
  }

  const int nblocks = gridDim.x * gridDim.y * gridDim.z;
  const double sum = block_sum<double>(s_sum, scratch);
  __syncthreads();  // warp 0 has read scratch before the second sum writes it
  const double l1 = block_sum<double>(l1_sum, scratch);
  if (tid == 0) {
    block_sums[(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x] = make_double2(sum, l1);
    __threadfence();  // the sums are visible before the count says so
    last = atomicAdd(done, 1u) == (unsigned)nblocks - 1;
  }
  __syncthreads();
  if (!last) return;
  double total = 0.0, total_l1 = 0.0;
  for (int i = tid; i < nblocks; i += kThreads) {
    const double2 b = __ldcg(block_sums + i);  // L2: other blocks' writes
    total += b.x;
    total_l1 += b.y;
  }
  total = block_sum<double>(total, scratch);
  __syncthreads();
  total_l1 = block_sum<double>(total_l1, scratch);
  if (tid == 0) out[0] = (float)(w.constant + w.ssim * (total / count) + w.l1 * (total_l1 / count));
}

// The reflect pad copied pixel i (1 <= i <= R, or n-1-R <= i <= n-2) to a padded position p
// outside the image; the gradient reaching p, sum_q w(q - p) P(q), folds back onto i. get(q)
// reads the map at image position q, always within R of i.
template <typename Get>
__device__ __forceinline__ float mirror_taps(int i, int n, Get get) {
  float s = 0.f;
  if (i >= 1 && i <= kRadius)  // p = -i
    for (int q = 0; q <= kRadius - i; ++q) s = fmaf(kGauss[q + i + kRadius], get(q), s);
  if (i >= n - 1 - kRadius && i <= n - 2) {  // p = 2 (n - 1) - i
    const int p = 2 * (n - 1) - i;
    for (int q = p - kRadius; q < n; ++q) s = fmaf(kGauss[q - p + kRadius], get(q), s);
  }
  return s;
}

// Backward: dS/dx_i = 1/N * sum over padded copies p of i, and windows q around p, of
// w(q - p) (dS/dmu_x(q) + 2 x_i dS/dE[x^2](q) + y_i dS/dE[xy](q)). The sum over q is the same
// separable filter (the window is symmetric) applied to the three maps, zero outside the image,
// plus the reflected taps of border pixels. The L1 term adds w.l1 / N * sign(x_i - y_i), with
// sign(0) = 0 as torch's abs().
__global__ void __launch_bounds__(kThreads)
    ssim_backward_kernel(const float* __restrict__ img, const float* __restrict__ ref,
                         const float* __restrict__ partials, const float* __restrict__ grad_out, int C, int H,
                         int W, float inv_count, LossWeights w, float* __restrict__ grad) {
  __shared__ float sp[3][kInH][kInW];
  __shared__ float hs[3][kInH][kTileW];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTileW + tx;
  const int x0 = blockIdx.x * kTileW, y0 = blockIdx.y * kTileH;
  const int64_t plane = (int64_t)H * W, base = blockIdx.z * plane, map = (int64_t)C * plane;

  for (int i = tid; i < kInH * kInW; i += kThreads) {
    const int r = i / kInW, c = i % kInW, gy = y0 - kRadius + r, gx = x0 - kRadius + c;
    const bool in = gy >= 0 && gy < H && gx >= 0 && gx < W;
    const int64_t g = base + (int64_t)gy * W + gx;
#pragma unroll
    for (int m = 0; m < 3; ++m) sp[m][r][c] = in ? partials[g + m * map] : 0.f;
  }
  __syncthreads();

  for (int i = tid; i < kInH * kTileW; i += kThreads) {
    const int r = i / kTileW, c = i % kTileW, gx = x0 + c;
#pragma unroll
    for (int m = 0; m < 3; ++m) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < kTaps; ++k) s = fmaf(kGauss[k], sp[m][r][c + k], s);
      if (gx <= kRadius || gx >= W - 1 - kRadius)
        s += mirror_taps(gx, W, [&](int q) { return sp[m][r][q - x0 + kRadius]; });
      hs[m][r][c] = s;
    }
  }
  __syncthreads();

  const int px = x0 + tx, oy = ty * kRows;  // outputs: tile rows oy .. oy + kRows - 1, column tx
  if (px >= W) return;
  float f[kRows][3];
#pragma unroll
  for (int j = 0; j < kRows; ++j) f[j][0] = f[j][1] = f[j][2] = 0.f;
#pragma unroll
  for (int rr = 0; rr < kRows + 2 * kRadius; ++rr) {
    const float h[3] = {hs[0][oy + rr][tx], hs[1][oy + rr][tx], hs[2][oy + rr][tx]};
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int k = rr - j;
      if (k < 0 || k >= kTaps) continue;
#pragma unroll
      for (int m = 0; m < 3; ++m) f[j][m] = fmaf(kGauss[k], h[m], f[j][m]);
    }
  }
  const float scale = __ldg(grad_out) * inv_count, s_scale = scale * (float)w.ssim, l1_scale = scale * (float)w.l1;
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int py = y0 + oy + j;
    if (py >= H) break;
    if (py <= kRadius || py >= H - 1 - kRadius) {
#pragma unroll
      for (int m = 0; m < 3; ++m) f[j][m] += mirror_taps(py, H, [&](int q) { return hs[m][q - y0 + kRadius][tx]; });
    }
    const int64_t o = base + (int64_t)py * W + px;
    const float x = img[o], y = ref[o], sign = x > y ? 1.f : (x < y ? -1.f : 0.f);
    grad[o] = s_scale * (f[j][0] + 2.f * x * f[j][1] + y * f[j][2]) + l1_scale * sign;
  }
}

// "[3, 16, 16]". Streaming t.sizes() from this nvcc-built file crashed (torch 2.11 on the H200).
std::string shape(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

void check_image(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "gsexp ssim: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "gsexp ssim: ", name, " must be float32, got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), "gsexp ssim: ", name, " must be contiguous");
  TORCH_CHECK(t.dim() == 3, "gsexp ssim: ", name, " must be [C,H,W], got ", shape(t));
  TORCH_CHECK(t.size(1) > kRadius && t.size(2) > kRadius, "gsexp ssim: ", name, " is ", shape(t),
              "; reflect padding by ", kRadius, " needs H and W of at least ", kRadius + 1);
  TORCH_CHECK(t.size(0) >= 1 && t.size(0) <= 65535, "gsexp ssim: ", name, " has ", t.size(0), " channels");
}

void check_pair(const torch::Tensor& img, const torch::Tensor& ref) {
  check_image(img, "img");
  check_image(ref, "ref");
  TORCH_CHECK(img.sizes() == ref.sizes(), "gsexp ssim: img ", shape(img), " and ref ", shape(ref), " differ");
  TORCH_CHECK(img.device() == ref.device(), "gsexp ssim: img and ref are on different devices");
}

dim3 tile_grid(const torch::Tensor& img) {
  return dim3((unsigned)((img.size(2) + kTileW - 1) / kTileW), (unsigned)((img.size(1) + kTileH - 1) / kTileH),
              (unsigned)img.size(0));
}

}  // namespace

std::vector<torch::Tensor> ssim_forward(torch::Tensor img, torch::Tensor ref, double w_ssim, double w_l1,
                                        double w_constant) {
  check_pair(img, ref);
  const c10::cuda::CUDAGuard guard(img.device());
  const int C = img.size(0), H = img.size(1), W = img.size(2);
  const dim3 grid = tile_grid(img);
  const auto opts = img.options();
  auto partials = torch::empty({3, C, H, W}, opts);
  auto block_sums = torch::empty({(int64_t)grid.x * grid.y * grid.z, 2}, opts.dtype(torch::kFloat64));
  auto done = torch::empty({1}, opts.dtype(torch::kInt32));
  auto value = torch::empty({}, opts);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  C10_CUDA_CHECK(cudaMemsetAsync(done.data_ptr(), 0, sizeof(int), stream));
  ssim_forward_kernel<<<grid, dim3(kTileW, kBlockH), 0, stream>>>(
      img.data_ptr<float>(), ref.data_ptr<float>(), C, H, W, partials.data_ptr<float>(),
      reinterpret_cast<double2*>(block_sums.data_ptr<double>()), reinterpret_cast<unsigned*>(done.data_ptr<int>()),
      value.data_ptr<float>(), (double)img.numel(), LossWeights{w_ssim, w_l1, w_constant});
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {value, partials};
}

torch::Tensor ssim_backward(torch::Tensor img, torch::Tensor ref, torch::Tensor partials, torch::Tensor grad_out,
                            double w_ssim, double w_l1) {
  check_pair(img, ref);
  const int C = img.size(0), H = img.size(1), W = img.size(2);
  TORCH_CHECK(partials.is_cuda() && partials.scalar_type() == torch::kFloat32 && partials.is_contiguous() &&
                  partials.dim() == 4 && partials.size(0) == 3 && partials.size(1) == C && partials.size(2) == H &&
                  partials.size(3) == W,
              "gsexp ssim: partials must be ssim_forward's contiguous float32 [3,C,H,W], got ", shape(partials));
  TORCH_CHECK(grad_out.is_cuda() && grad_out.scalar_type() == torch::kFloat32 && grad_out.numel() == 1,
              "gsexp ssim: grad_out must be one float32 CUDA value");
  const c10::cuda::CUDAGuard guard(img.device());
  auto grad = torch::empty_like(img);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  ssim_backward_kernel<<<tile_grid(img), dim3(kTileW, kBlockH), 0, stream>>>(
      img.data_ptr<float>(), ref.data_ptr<float>(), partials.data_ptr<float>(), grad_out.data_ptr<float>(), C, H, W,
      (float)(1.0 / (double)img.numel()), LossWeights{w_ssim, w_l1, 0.0}, grad.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad;
}
