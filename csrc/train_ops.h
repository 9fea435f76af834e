// Fused training losses (csrc/ssim.cu): SSIM as torchmetrics computes it, one kernel per direction.
#pragma once

#include <torch/extension.h>

#include <vector>

// img, ref: contiguous float32 CUDA [C,H,W] (H, W >= 6). Returns {mean SSIM (0-dim, on the
// device, no host sync), partials [3,C,H,W]: per pixel dS/dmu_x, dS/dE[x^2], dS/dE[xy]}.
std::vector<torch::Tensor> ssim_forward(torch::Tensor img, torch::Tensor ref);

// dL/dimg for L = f(mean SSIM), grad_out = dL/d(mean SSIM) (one float32 value on the device);
// partials from ssim_forward on the same img and ref. The target gets no gradient.
torch::Tensor ssim_backward(torch::Tensor img, torch::Tensor ref, torch::Tensor partials, torch::Tensor grad_out);
