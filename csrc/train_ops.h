// Fused training losses (csrc/ssim.cu): SSIM as torchmetrics computes it, optionally with the
// L1 term, one kernel per direction.
#pragma once

// torch/types.h, not torch/extension.h: nvcc compiles these .cu files with it, and pybind11
// and torch's C++ API took adam.cu from 88 s to 186 s to compile on the 2-core machine.
#include <torch/types.h>

#include <vector>

// img, ref: contiguous float32 CUDA [C,H,W] (H, W >= 6). Returns {value = w_ssim * mean SSIM +
// w_l1 * mean |img - ref| + w_constant (0-dim, on the device, no host sync), partials [3,C,H,W]:
// per pixel dS/dmu_x, dS/dE[x^2], dS/dE[xy]}.
std::vector<torch::Tensor> ssim_forward(torch::Tensor img, torch::Tensor ref, double w_ssim, double w_l1,
                                        double w_constant);

// dL/dimg for L = f(value), grad_out = dL/dvalue (one float32 value on the device); partials from
// ssim_forward on the same img and ref, and the same weights. The target gets no gradient.
torch::Tensor ssim_backward(torch::Tensor img, torch::Tensor ref, torch::Tensor partials, torch::Tensor grad_out,
                            double w_ssim, double w_l1);

// Densification statistics (csrc/densify.cu): where radii > 0, grad2d += |grad_means2d * (half_w,
// half_h)|, count += 1, max_radii = max(max_radii, radii). float32 [N] accumulators, int32 radii.
void densify_stats(torch::Tensor grad_means2d, torch::Tensor radii, double half_w, double half_h,
                   torch::Tensor grad2d, torch::Tensor count, torch::Tensor max_radii);

// pose_opt's motion (csrc/pose.cu; gsexp/train/pose.py): means [N,3], quats [N,4] of the model,
// delta [6] one camera's correction (w, t), rot_t [3,3] its camera-to-world rotation, center [3]
// its centre, all contiguous float32 CUDA, read on the device (no host sync). Forward: {means
// moved, quats moved}; backward: {dL/dmeans, dL/dquats, dL/ddelta [6]} from the moved ones' grads.
std::vector<torch::Tensor> pose_move_forward(torch::Tensor means, torch::Tensor quats, torch::Tensor delta,
                                             torch::Tensor rot_t, torch::Tensor center);
std::vector<torch::Tensor> pose_move_backward(torch::Tensor g_means, torch::Tensor g_quats, torch::Tensor means,
                                              torch::Tensor quats, torch::Tensor delta, torch::Tensor rot_t,
                                              torch::Tensor center);

// appearance=bilateral_grid's slice and transform (csrc/bilateral.cu; gsexp/train/appearance.py):
// image [3,H,W] the render, grid [12,L,GY,GX] one photo's changes from identity, contiguous float32
// CUDA. Forward: the render through each pixel's sampled 3x4 transform; backward: {dL/dimage,
// dL/dgrid} from dL/dout.
torch::Tensor bilateral_slice_forward(torch::Tensor image, torch::Tensor grid);
std::vector<torch::Tensor> bilateral_slice_backward(torch::Tensor g_out, torch::Tensor image, torch::Tensor grid);
// Its total-variation regulariser: {value (0-dim, on the device), d value / d grid}.
std::vector<torch::Tensor> bilateral_total_variation(torch::Tensor grid);
