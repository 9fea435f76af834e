// Warp reductions shared by the backward, pose and bilateral kernels (not in common.cuh: the
// host builds of tests/ compile that without the warp intrinsics).
#pragma once

// The sum over a full warp, in every lane.
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
