// Stages 2 and 3: one key per (Gaussian, tile) pair, a radix sort over only the key bits in
// use, and each tile's range in the sorted list.
#include <cub/cub.cuh>

#include "common.cuh"
#include "kernels.h"

namespace {

__global__ void duplicate_kernel(int n, const float2* __restrict__ means2d, const int* __restrict__ radii,
                                 const float* __restrict__ depths, const int64_t* __restrict__ offsets,
                                 int tiles_x, int tiles_y, uint64_t* keys, int32_t* values) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || radii[i] <= 0) return;
  int x0, y0, x1, y1;
  tile_rect(means2d[i].x, means2d[i].y, (float)radii[i], tiles_x, tiles_y, x0, y0, x1, y1);
  int64_t out = i == 0 ? 0 : offsets[i - 1];  // offsets: inclusive prefix sum of tiles touched
  uint64_t depth_bits = __float_as_uint(depths[i]);  // z > 0: bits order like the floats
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      keys[out] = ((uint64_t)(y * tiles_x + x) << 32) | depth_bits;
      values[out] = i;
      ++out;
    }
}

__global__ void tile_ranges_kernel(int num_pairs, const uint64_t* __restrict__ keys, int2* ranges) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= num_pairs) return;
  int tile = (int)(keys[i] >> 32);
  if (i == 0) {
    ranges[tile].x = 0;
  } else {
    int prev = (int)(keys[i - 1] >> 32);
    if (prev != tile) {
      ranges[prev].y = i;
      ranges[tile].x = i;
    }
  }
  if (i == num_pairs - 1) ranges[tile].y = num_pairs;
}

}  // namespace

void launch_duplicate(int n, const float* means2d, const int* radii, const float* depths,
                      const int64_t* offsets, const Camera& cam, uint64_t* keys, int32_t* values,
                      cudaStream_t stream) {
  if (n == 0) return;
  duplicate_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
      n, reinterpret_cast<const float2*>(means2d), radii, depths, offsets, cam.tiles_x, cam.tiles_y,
      keys, values);
}

size_t sort_temp_bytes(int num_pairs, int end_bit) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint64_t*)nullptr, (uint64_t*)nullptr,
                                  (const int32_t*)nullptr, (int32_t*)nullptr, num_pairs, 0, end_bit);
  return bytes;
}

void sort_pairs(void* temp, size_t temp_bytes, const uint64_t* keys_in, uint64_t* keys_out,
                const int32_t* values_in, int32_t* values_out, int num_pairs, int end_bit,
                cudaStream_t stream) {
  cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in, values_out,
                                  num_pairs, 0, end_bit, stream);
}

void launch_tile_ranges(int num_pairs, const uint64_t* sorted_keys, int* ranges, cudaStream_t stream) {
  if (num_pairs == 0) return;
  tile_ranges_kernel<<<(num_pairs + 255) / 256, 256, 0, stream>>>(
      num_pairs, sorted_keys, reinterpret_cast<int2*>(ranges));
}
