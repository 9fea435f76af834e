// Stages 2 and 3: one key per (Gaussian, tile) pair, a radix sort over only the key bits in
// use, and each tile's range in the sorted list.
#include <cub/cub.cuh>
#include <cuda/std/functional>

#include "common.cuh"
#include "intersect.cuh"
#include "kernels.h"

namespace {

// The tiles are those preprocess counted: the same routine (intersect.cuh) on the same inputs.
// Pairs at or past `capacity` are dropped (the buffers' size; the caller checks the count).
__global__ void duplicate_kernel(int n, const float2* __restrict__ means2d, const float4* __restrict__ conic_opacity,
                                 const int* __restrict__ radii, const float* __restrict__ depths,
                                 const int64_t* __restrict__ offsets, Camera cam, int intersect, int64_t capacity,
                                 uint64_t* keys, int32_t* values) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || radii[i] <= 0) return;
  int64_t out = i == 0 ? 0 : offsets[i - 1];  // offsets: inclusive prefix sum of tiles touched
  const uint64_t depth_bits = __float_as_uint(depths[i]);  // z > 0: bits order like the floats
  auto emit = [&](int x, int y) {
    if (out < capacity) {
      keys[out] = ((uint64_t)(y * cam.tiles_x + x) << 32) | depth_bits;
      values[out] = i;
    }
    ++out;
  };
  int x0, y0, x1, y1;
  Ellipse e;
  if (intersect == INTERSECT_AABB) {
    tile_rect(means2d[i].x, means2d[i].y, (float)radii[i], cam.tiles_x, cam.tiles_y, x0, y0, x1, y1);
  } else if (!ellipse_of(means2d[i].x, means2d[i].y, conic_opacity[i], e) ||
             !snug_rect(e, cam.width, cam.height, x0, y0, x1, y1)) {
    return;  // preprocess counted no tiles either
  } else if (intersect == INTERSECT_ACCUTILE) {
    accutile(e, cam.width, cam.height, x0, y0, x1, y1, emit);
    return;
  }
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) emit(x, y);
}

// Keys of unused buffer slots carry tile = num_tiles and sort last: they end the last range.
__global__ void tile_ranges_kernel(int num_pairs, int num_tiles, const uint64_t* __restrict__ keys, int2* ranges) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= num_pairs) return;
  const int tile = (int)(keys[i] >> 32);
  const int prev = i == 0 ? -1 : (int)(keys[i - 1] >> 32);
  if (prev != tile) {
    if (prev >= 0) ranges[prev].y = i;
    if (tile < num_tiles) ranges[tile].x = i;
  }
  if (i == num_pairs - 1 && tile < num_tiles) ranges[tile].y = num_pairs;
}

// A tile's bucket in the heavy-first order: the bit length of its list length and the two bits
// below the top one, so lengths within a quarter octave share a bucket (0: empty).
constexpr int ORDER_BUCKETS = 4 * 33;

__device__ inline int order_bucket(int2 range) {
  const int len = range.y - range.x;
  const int bits = 32 - __clz(len);
  if (bits <= 2) return bits;
  return 4 * (bits - 2) + ((len >> (bits - 3)) & 3);
}

// Tiles longest list first, as one block: a counting sort on the buckets above (order within a
// bucket is arbitrary; the scheduling only needs the rough order).
__global__ void tile_order_kernel(int num_tiles, const int2* __restrict__ ranges, int* order) {
  __shared__ int slot[ORDER_BUCKETS];
  for (int b = threadIdx.x; b < ORDER_BUCKETS; b += blockDim.x) slot[b] = 0;
  __syncthreads();
  for (int t = threadIdx.x; t < num_tiles; t += blockDim.x) atomicAdd(&slot[order_bucket(ranges[t])], 1);
  __syncthreads();
  if (threadIdx.x == 0) {  // first position of each bucket, largest bucket first
    int next = 0;
    for (int b = ORDER_BUCKETS - 1; b >= 0; --b) {
      const int count = slot[b];
      slot[b] = next;
      next += count;
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < num_tiles; t += blockDim.x) order[atomicAdd(&slot[order_bucket(ranges[t])], 1)] = t;
}

}  // namespace

size_t scan_temp_bytes(int n) {
  size_t bytes = 0;
  cub::DeviceScan::InclusiveScanInit(nullptr, bytes, (const int*)nullptr, (int64_t*)nullptr,
                                     cuda::std::plus<int64_t>{}, (int64_t)0, n);
  return bytes;
}

// Summed in 64 bits (the init value's type), so a count past 2^31 is seen, not wrapped.
void pair_offsets(void* temp, size_t temp_bytes, const int* touched, int64_t* offsets, int n,
                  cudaStream_t stream) {
  cub::DeviceScan::InclusiveScanInit(temp, temp_bytes, touched, offsets, cuda::std::plus<int64_t>{},
                                     (int64_t)0, n, stream);
}

void launch_duplicate(int n, const float* means2d, const float* conic_opacity, const int* radii,
                      const float* depths, const int64_t* offsets, const Camera& cam, int intersect,
                      int64_t capacity, uint64_t* keys, int32_t* values, cudaStream_t stream) {
  if (n == 0) return;
  duplicate_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
      n, reinterpret_cast<const float2*>(means2d), reinterpret_cast<const float4*>(conic_opacity), radii, depths,
      offsets, cam, intersect, capacity, keys, values);
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

void launch_tile_ranges(int num_pairs, int num_tiles, const uint64_t* sorted_keys, int* ranges,
                        cudaStream_t stream) {
  if (num_pairs == 0) return;
  tile_ranges_kernel<<<(num_pairs + 255) / 256, 256, 0, stream>>>(
      num_pairs, num_tiles, sorted_keys, reinterpret_cast<int2*>(ranges));
}

void launch_tile_order(int num_tiles, const int* ranges, int* order, cudaStream_t stream) {
  if (num_tiles == 0) return;
  tile_order_kernel<<<1, 1024, 0, stream>>>(num_tiles, reinterpret_cast<const int2*>(ranges), order);
}
