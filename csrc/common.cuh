// Small device helpers shared by the stages.
#pragma once

#include "config.h"

// Tiles a square of half-size `radius` around (mx, my) touches: [x0, x1) x [y0, y1).
// Preprocess counts with it and duplicate emits with it, so the two always agree.
__device__ inline void tile_rect(float mx, float my, float radius, int tiles_x, int tiles_y,
                                 int& x0, int& y0, int& x1, int& y1) {
  x0 = min(max((int)__fdiv_rn(mx - radius, TILE_SIZE), 0), tiles_x);
  y0 = min(max((int)__fdiv_rn(my - radius, TILE_SIZE), 0), tiles_y);
  x1 = min(max((int)__fdiv_rn(mx + radius + TILE_SIZE - 1, TILE_SIZE), 0), tiles_x);
  y1 = min(max((int)__fdiv_rn(my + radius + TILE_SIZE - 1, TILE_SIZE), 0), tiles_y);
}

// This thread's pixel in its block's tile (one block per tile, one thread per pixel) and
// the tile's range in the sorted list. `order` (or null: raster order) maps blocks to tiles.
struct TilePixel {
  int tile;
  int x, y;
  bool inside;  // false for the padding threads of tiles on the right and bottom edges
  int2 range;
};

// SUB > 1: SUB x SUB blocks share a tile, each a strip of TILE_SIZE / SUB^2 of its rows (whole
// rows: a matrix blend's warp holds two). Block b is strip b % SUB^2 of the tile that `order`
// gives b / SUB^2; local: the thread's pixel index within the tile (row-major).
template <int SUB = 1>
__device__ inline TilePixel tile_pixel(const int* ranges, const int* order, int tiles_x, int width, int height,
                                       int* local = nullptr) {
  constexpr int THREADS = TILE_SIZE * TILE_SIZE / (SUB * SUB);
  const int block = (int)blockIdx.x / (SUB * SUB), part = (int)blockIdx.x % (SUB * SUB);
  const int tile = order ? order[block] : block;
  const int p = part * THREADS + (int)threadIdx.x;
  if (local) *local = p;
  TilePixel t;
  t.tile = tile;
  t.x = (tile % tiles_x) * TILE_SIZE + p % TILE_SIZE;
  t.y = (tile / tiles_x) * TILE_SIZE + p / TILE_SIZE;
  t.inside = t.x < width && t.y < height;
  t.range = reinterpret_cast<const int2*>(ranges)[tile];
  return t;
}
