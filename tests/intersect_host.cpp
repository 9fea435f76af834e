// Host build of csrc/intersect.cuh for tests/test_intersect.py: the CUDA routines compiled by
// g++ with the device intrinsics mapped to their IEEE host equivalents (double), so a CPU can
// check them against the torch reference. Reads "mx my a b c o width height mode" per line, prints
// "count x0 y0 x1 y1" (the snug box; count 0 when culled) and, for accutile, its tiles as "tx,ty".
#include <math.h>  // log, ceil, floor, fmin, fmax as CUDA has them
#include <cmath>
#include <cstdio>
#include <string>

#define __device__
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
struct float4 { float x, y, z, w; };

#include "intersect.cuh"

int main() {
  float mx, my, a, b, c, o;
  int width, height, mode;
  while (std::scanf("%f %f %f %f %f %f %d %d %d", &mx, &my, &a, &b, &c, &o, &width, &height, &mode) == 9) {
    Ellipse e;
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0, count = 0;
    std::string tiles;
    if (ellipse_of(mx, my, float4{a, b, c, o}, e) && snug_rect(e, width, height, x0, y0, x1, y1)) {
      count = (x1 - x0) * (y1 - y0);
      if (mode == INTERSECT_ACCUTILE)
        count = accutile(e, width, height, x0, y0, x1, y1,
                         [&](int x, int y) { tiles += " " + std::to_string(x) + "," + std::to_string(y); });
    }
    std::printf("%d %d %d %d %d%s\n", count, x0, y0, x1, y1, tiles.c_str());
  }
  return 0;
}
