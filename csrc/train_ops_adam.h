// One Adam step for several tensors in one kernel launch (multi-tensor apply).
#pragma once

// torch/types.h, not torch/extension.h: nvcc compiles these .cu files with it, and pybind11
// and torch's C++ API took adam.cu from 88 s to 186 s to compile on the 2-core machine.
#include <torch/types.h>

#include <optional>
#include <vector>

// Largest number of tensors one call takes (the pointer table is a kernel argument).
constexpr int ADAM_MAX_TENSORS = 8;

// Per tensor k, exactly torch.optim.Adam's (foreach, weight_decay 0) update with the host
// scalars of its group: step_sizes[k] = -lr / (1 - beta1^t), bias2_sqrts[k] = sqrt(1 - beta2^t).
// visible: optional [N] bool; rows (first dim) not visible keep param and moments unchanged.
void fused_adam(std::vector<torch::Tensor> params, std::vector<torch::Tensor> grads,
                std::vector<torch::Tensor> exp_avgs, std::vector<torch::Tensor> exp_avg_sqs,
                std::vector<double> step_sizes, std::vector<double> bias2_sqrts, std::vector<double> beta1s,
                std::vector<double> beta2s, std::vector<double> epss, std::optional<torch::Tensor> visible);
