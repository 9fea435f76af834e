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

// SUB > 1: SUB x SUB blocks share a tile, each a (TILE_SIZE / SUB)^2 part of its pixels; block b
// is part b % SUB^2 of the tile that `order` gives b / SUB^2.
template <int SUB = 1>
__device__ inline TilePixel tile_pixel(const int* ranges, const int* order, int tiles_x, int width, int height) {
  constexpr int SIDE = TILE_SIZE / SUB;
  const int block = (int)blockIdx.x / (SUB * SUB), part = (int)blockIdx.x % (SUB * SUB);
  const int tile = order ? order[block] : block;
  TilePixel p;
  p.tile = tile;
  p.x = (tile % tiles_x) * TILE_SIZE + (part % SUB) * SIDE + (int)threadIdx.x % SIDE;
  p.y = (tile / tiles_x) * TILE_SIZE + (part / SUB) * SIDE + (int)threadIdx.x / SIDE;
  p.inside = p.x < width && p.y < height;
  p.range = reinterpret_cast<const int2*>(ranges)[tile];
  return p;
}
