// Which tiles get a Gaussian's list entries (mirrors gsexp/render/reference/intersect.py).
//   aabb:     the square of half-size ceil(3 sigma_max) (vanilla 3DGS; see tile_rect)
//   snugbox:  the exact box of the ellipse where o G(d) = 1/255, i.e. d^T cov^-1 d = 2 ln(255 o)
//   accutile: only the tiles that ellipse touches, walked line by line along the box's
//             shorter side, each line's span from the ellipse's extent within the line's band
// Preprocess counts with these routines and duplicate emits with them, from the same inputs
// (the mean and the conic/opacity preprocess wrote). The arithmetic is in double, written
// with the _rn intrinsics, which the compiler never fuses into FMAs, so that the two kernels
// compute the same bits and the count always equals what is emitted.
#pragma once

#include "config.h"


struct Ellipse {
  double mx, my;         // centre, pixels
  double sxx, sxy, syy;  // 2D covariance (the conic's inverse)
  double t;              // level: d^T cov^-1 d <= t where alpha >= 1/255
};

// False when the Gaussian can never reach alpha 1/255 (o < 1/255) or its conic is degenerate.
// In double: for a thin ellipse the conic's determinant cancels, and in fp32 its error would
// shrink the box by far more than the margins.
__device__ inline bool ellipse_of(float mx, float my, float4 conic_opacity, Ellipse& e) {
  const double a = conic_opacity.x, b = conic_opacity.y, c = conic_opacity.z, o = conic_opacity.w;
  const double det = __dsub_rn(__dmul_rn(a, c), __dmul_rn(b, b));
  if (!(conic_opacity.w >= ALPHA_MIN) || !(det > 0.0)) return false;
  const double level = __dmul_rn(2.0 * (1.0 + LEVEL_MARGIN), log(__dmul_rn(255.0, o)));
  e = {mx, my, __ddiv_rn(c, det), __ddiv_rn(-b, det), __ddiv_rn(a, det), fmax(level, 0.0)};
  return true;
}

// Tiles [t0, t1) holding the pixel centres (integers) in [lo, hi] of an axis of `size` pixels.
__device__ inline bool pixel_span(double lo, double hi, int size, int& t0, int& t1) {
  const double first = fmax(ceil(__dsub_rn(lo, SPAN_MARGIN)), 0.0);
  const double last = fmin(floor(__dadd_rn(hi, SPAN_MARGIN)), size - 1.0);
  if (!(first <= last)) return false;
  t0 = (int)first / TILE_SIZE;
  t1 = (int)last / TILE_SIZE + 1;
  return true;
}

__device__ inline bool snug_rect(const Ellipse& e, int width, int height, int& x0, int& y0, int& x1, int& y1) {
  const double ex = __dsqrt_rn(__dmul_rn(e.t, e.sxx)), ey = __dsqrt_rn(__dmul_rn(e.t, e.syy));
  return pixel_span(__dsub_rn(e.mx, ex), __dadd_rn(e.mx, ex), width, x0, x1) &&
         pixel_span(__dsub_rn(e.my, ey), __dadd_rn(e.my, ey), height, y0, y1);
}

// The ellipse's span along u within the band v in [v0, v1] (offsets from the centre), for
// covariance entries suu, suv, svv: u | v runs over k v +- s sqrt(t - v^2 / svv), and its
// extremes over the band sit where the ellipse's own extremes are, clamped into the band.
__device__ inline bool band_span(double suu, double suv, double svv, double t, double v0, double v1, double& lo,
                                 double& hi) {
  const double ev = __dsqrt_rn(__dmul_rn(t, svv));
  v0 = fmax(v0, -ev);
  v1 = fmin(v1, ev);
  if (!(v0 <= v1)) return false;
  const double k = __ddiv_rn(suv, svv), s = __dsqrt_rn(fmax(__dsub_rn(suu, __dmul_rn(suv, k)), 0.0));
  const double v_top = __dmul_rn(suv, __dsqrt_rn(__ddiv_rn(t, suu)));  // v of the point with the largest u
  const double vh = fmin(fmax(v_top, v0), v1), vl = fmin(fmax(-v_top, v0), v1);
  auto half_width = [&](double v) {
    return __dmul_rn(s, __dsqrt_rn(fmax(__dsub_rn(t, __ddiv_rn(__dmul_rn(v, v), svv)), 0.0)));
  };
  hi = __dadd_rn(__dmul_rn(k, vh), half_width(vh));
  lo = __dsub_rn(__dmul_rn(k, vl), half_width(vl));
  return true;
}

// accutile: calls emit(tx, ty) for every tile the ellipse touches inside its snug box
// [x0, x1) x [y0, y1); returns how many.
template <typename Emit>
__device__ inline int accutile(const Ellipse& e, int width, int height, int x0, int y0, int x1, int y1, Emit emit) {
  const bool rows = (y1 - y0) <= (x1 - x0);  // walk the shorter side
  const int n0 = rows ? y0 : x0, n1 = rows ? y1 : x1;
  const int size_line = rows ? height : width, size_span = rows ? width : height;
  const double m_line = rows ? e.my : e.mx, m_span = rows ? e.mx : e.my;
  const double s_span = rows ? e.sxx : e.syy, s_line = rows ? e.syy : e.sxx;
  int count = 0;
  for (int n = n0; n < n1; ++n) {
    const double p0 = n * TILE_SIZE, p1 = fmin((double)(n * TILE_SIZE + TILE_SIZE - 1), size_line - 1.0);
    double lo, hi;
    int t0, t1;
    if (!band_span(s_span, e.sxy, s_line, e.t, __dsub_rn(p0, m_line), __dsub_rn(p1, m_line), lo, hi)) continue;
    if (!pixel_span(__dadd_rn(m_span, lo), __dadd_rn(m_span, hi), size_span, t0, t1)) continue;
    for (int m = t0; m < t1; ++m) rows ? emit(m, n) : emit(n, m);
    count += t1 - t0;
  }
  return count;
}
