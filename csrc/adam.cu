// Fused Adam: every parameter tensor in one launch. Each block takes one chunk of one tensor,
// found in a small table passed by value (multi-tensor apply), so the ~6 per-tensor launches
// (and torch's ~8 foreach passes over memory) become one pass reading p, g, m, v once.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

#include "train_ops_adam.h"

namespace {

constexpr int kThreads = 256;
constexpr int kVecPerThread = 8;
constexpr int64_t kChunk = (int64_t)kThreads * 4 * kVecPerThread;  // elements per block

// Scalars of one tensor's update, rounded to float on the host as torch's foreach ops do.
struct Coef {
  float step_size;  // -lr / (1 - beta1^t)
  float bias2_sqrt;
  float w1, one_minus_w1;  // lerp weight 1 - beta1, and 1 - that weight
  float beta2, w2;         // w2 = 1 - beta2
  float eps;
};

struct Table {
  float* param[ADAM_MAX_TENSORS];
  const float* grad[ADAM_MAX_TENSORS];
  float* exp_avg[ADAM_MAX_TENSORS];
  float* exp_avg_sq[ADAM_MAX_TENSORS];
  int64_t numel[ADAM_MAX_TENSORS];
  int64_t row_size[ADAM_MAX_TENSORS];              // elements per row (sparse mode)
  int64_t chunk_begin[ADAM_MAX_TENSORS + 1];       // prefix sum of chunks per tensor
  bool aligned[ADAM_MAX_TENSORS];                  // all four pointers 16-byte aligned
  Coef coef[ADAM_MAX_TENSORS];
  int count;
};

// The operations and their order follow torch's foreach Adam (lerp_, mul_, addcmul_, sqrt,
// div_, add_, addcdiv_); the _rn intrinsics keep --use_fast_math from approximating sqrt/div.
__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v, const Coef& c) {
  m = fabsf(c.w1) < 0.5f ? fmaf(c.w1, g - m, m) : fmaf(-(g - m), c.one_minus_w1, g);  // at::lerp
  v = __fmul_rn(v, c.beta2);
  v = fmaf(c.w2 * g, g, v);
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bias2_sqrt), c.eps);
  p = fmaf(c.step_size, __fdiv_rn(m, denom), p);
}

__device__ __forceinline__ int64_t row_of(int64_t i, int64_t row_size) {
  // 32-bit division when it fits: much cheaper than the emulated 64-bit one
  if (i <= UINT32_MAX && row_size <= UINT32_MAX) return (uint32_t)i / (uint32_t)row_size;
  return i / row_size;
}

// Bit j set: element i + j lies in a visible row (all of i .. i+3 exist).
__device__ __forceinline__ unsigned visible_bits4(const bool* visible, int64_t i, int64_t row_size) {
  int64_t row = row_of(i, row_size);
  int64_t col = i - row * row_size;
  unsigned bits = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (visible[row]) bits |= 1u << j;
    if (++col == row_size) { col = 0; ++row; }
  }
  return bits;
}

__device__ __forceinline__ float pick(unsigned bits, int j, float updated, float old) {
  return (bits >> j) & 1u ? updated : old;
}

template <bool kSparse>
__device__ void update_vec4(const Table& t, int k, int64_t i, const bool* visible) {
  const unsigned bits = kSparse ? visible_bits4(visible, i, t.row_size[k]) : 0xfu;
  if (bits == 0) return;  // invisible rows: not even read
  float4* p4 = reinterpret_cast<float4*>(t.param[k] + i);
  float4* m4 = reinterpret_cast<float4*>(t.exp_avg[k] + i);
  float4* v4 = reinterpret_cast<float4*>(t.exp_avg_sq[k] + i);
  const float4 g = *reinterpret_cast<const float4*>(t.grad[k] + i);
  const float4 p0 = *p4, m0 = *m4, v0 = *v4;
  float4 p = p0, m = m0, v = v0;
  const Coef& c = t.coef[k];
  adam_update(p.x, g.x, m.x, v.x, c);
  adam_update(p.y, g.y, m.y, v.y, c);
  adam_update(p.z, g.z, m.z, v.z, c);
  adam_update(p.w, g.w, m.w, v.w, c);
  if (kSparse && bits != 0xfu) {  // a float4 straddling rows: keep the invisible lanes' values
    p = make_float4(pick(bits, 0, p.x, p0.x), pick(bits, 1, p.y, p0.y), pick(bits, 2, p.z, p0.z), pick(bits, 3, p.w, p0.w));
    m = make_float4(pick(bits, 0, m.x, m0.x), pick(bits, 1, m.y, m0.y), pick(bits, 2, m.z, m0.z), pick(bits, 3, m.w, m0.w));
    v = make_float4(pick(bits, 0, v.x, v0.x), pick(bits, 1, v.y, v0.y), pick(bits, 2, v.z, v0.z), pick(bits, 3, v.w, v0.w));
  }
  *p4 = p;
  *m4 = m;
  *v4 = v;
}

template <bool kSparse>
__device__ void update_scalar(const Table& t, int k, int64_t i, const bool* visible) {
  if (kSparse && !visible[row_of(i, t.row_size[k])]) return;
  float p = t.param[k][i], m = t.exp_avg[k][i], v = t.exp_avg_sq[k][i];
  adam_update(p, t.grad[k][i], m, v, t.coef[k]);
  t.param[k][i] = p;
  t.exp_avg[k][i] = m;
  t.exp_avg_sq[k][i] = v;
}

template <bool kSparse>
__global__ void __launch_bounds__(kThreads) fused_adam_kernel(const __grid_constant__ Table t, const bool* visible) {
  const int64_t chunk = blockIdx.x;
  int k = 0;
  while (k + 1 < t.count && chunk >= t.chunk_begin[k + 1]) ++k;
  const int64_t begin = (chunk - t.chunk_begin[k]) * kChunk;
  const int64_t end = min(begin + kChunk, t.numel[k]);
  if (t.aligned[k]) {  // begin is a multiple of 4, so every float4 below is aligned
    const int64_t vec_end = begin + ((end - begin) & ~int64_t(3));
    for (int64_t i = begin + 4 * (int64_t)threadIdx.x; i < vec_end; i += 4 * kThreads)
      update_vec4<kSparse>(t, k, i, visible);
    for (int64_t i = vec_end + threadIdx.x; i < end; i += kThreads) update_scalar<kSparse>(t, k, i, visible);
  } else {
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) update_scalar<kSparse>(t, k, i, visible);
  }
}

// Same device as `like` (params[0] for the params), float32, contiguous.
void check_tensor(const torch::Tensor& t, const torch::Tensor& like, const char* name, size_t k) {
  TORCH_CHECK(t.is_cuda() && t.device() == like.device(), "fused_adam: ", name, "[", k,
              "] must be a CUDA tensor on ", like.device(), ", got ", t.device());
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "fused_adam: ", name, "[", k, "] must be float32, got ",
              t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), "fused_adam: ", name, "[", k, "] must be contiguous");
}

// "[3, 16]": streaming t.sizes() from an nvcc-built file crashed on the H200 (see ssim.cu).
std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

void check_like(const torch::Tensor& t, const torch::Tensor& param, const char* name, size_t k) {
  check_tensor(t, param, name, k);
  TORCH_CHECK(t.sizes() == param.sizes(), "fused_adam: ", name, "[", k, "] has shape ", shape_of(t),
              ", the param has ", shape_of(param));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Coef make_coef(double step_size, double bias2_sqrt, double beta1, double beta2, double eps) {
  const float w1 = (float)(1.0 - beta1);  // torch passes the lerp weight 1 - beta1 as a float
  return {(float)step_size, (float)bias2_sqrt, w1, 1.0f - w1, (float)beta2, (float)(1.0 - beta2), (float)eps};
}

}  // namespace

void fused_adam(std::vector<torch::Tensor> params, std::vector<torch::Tensor> grads,
                std::vector<torch::Tensor> exp_avgs, std::vector<torch::Tensor> exp_avg_sqs,
                std::vector<double> step_sizes, std::vector<double> bias2_sqrts, std::vector<double> beta1s,
                std::vector<double> beta2s, std::vector<double> epss, std::optional<torch::Tensor> visible) {
  const size_t n = params.size();
  TORCH_CHECK(n <= (size_t)ADAM_MAX_TENSORS, "fused_adam: at most ", ADAM_MAX_TENSORS, " tensors per call, got ", n);
  for (size_t len : {grads.size(), exp_avgs.size(), exp_avg_sqs.size(), step_sizes.size(), bias2_sqrts.size(),
                     beta1s.size(), beta2s.size(), epss.size()})
    TORCH_CHECK(len == n, "fused_adam: every list needs one entry per param (", n, "), got one of ", len);
  if (n == 0) return;
  const bool* vis = nullptr;
  if (visible) {
    TORCH_CHECK(visible->device() == params[0].device(), "fused_adam: visible is on ", visible->device(),
                ", the params on ", params[0].device());
    TORCH_CHECK(visible->scalar_type() == torch::kBool && visible->dim() == 1 && visible->is_contiguous(),
                "fused_adam: visible must be a contiguous 1-D bool tensor, got ", visible->scalar_type(), " ",
                shape_of(*visible));
    vis = visible->data_ptr<bool>();
  }
  Table t{};
  t.count = (int)n;
  for (size_t k = 0; k < n; ++k) {
    check_tensor(params[k], params[0], "params", k);
    check_like(grads[k], params[k], "grads", k);
    check_like(exp_avgs[k], params[k], "exp_avgs", k);
    check_like(exp_avg_sqs[k], params[k], "exp_avg_sqs", k);
    const int64_t numel = params[k].numel();
    if (visible) {
      TORCH_CHECK(params[k].dim() >= 1 && params[k].size(0) == visible->size(0), "fused_adam: params[", k,
                  "] has shape ", shape_of(params[k]), "; the visible mask needs ", visible->size(0), " rows");
      t.row_size[k] = visible->size(0) > 0 ? numel / visible->size(0) : 1;
    }
    t.param[k] = params[k].data_ptr<float>();
    t.grad[k] = grads[k].data_ptr<float>();
    t.exp_avg[k] = exp_avgs[k].data_ptr<float>();
    t.exp_avg_sq[k] = exp_avg_sqs[k].data_ptr<float>();
    t.numel[k] = numel;
    t.aligned[k] = aligned16(t.param[k]) && aligned16(t.grad[k]) && aligned16(t.exp_avg[k]) &&
                   aligned16(t.exp_avg_sq[k]);
    t.coef[k] = make_coef(step_sizes[k], bias2_sqrts[k], beta1s[k], beta2s[k], epss[k]);
    t.chunk_begin[k + 1] = t.chunk_begin[k] + (numel + kChunk - 1) / kChunk;
  }
  const int64_t blocks = t.chunk_begin[n];
  if (blocks == 0) return;
  TORCH_CHECK(blocks < (1LL << 31), "fused_adam: ", blocks, " chunks exceed the grid limit");
  const c10::cuda::CUDAGuard guard(params[0].device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vis)
    fused_adam_kernel<true><<<(unsigned)blocks, kThreads, 0, stream>>>(t, vis);
  else
    fused_adam_kernel<false><<<(unsigned)blocks, kThreads, 0, stream>>>(t, nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
