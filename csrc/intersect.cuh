// Which tiles get a Gaussian's list entries (mirrors gsexp/render/reference/intersect.py).
//   aabb:     the square of half-size ceil(3 sigma_max) (vanilla 3DGS; see tile_rect)
//   snugbox:  the exact box of the ellipse where o G(d) = 1/255, i.e. d^T cov^-1 d = 2 ln(255 o)
//   accutile: only the tiles that ellipse touches, walked line by line along the box's
//             shorter side, each line's span from the ellipse's extent within the line's band
// Preprocess counts with these routines and duplicate emits with them, from the same inputs
// (the mean and the conic/opacity preprocess wrote). The arithmetic is written with the
// _rn intrinsics, which the compiler never fuses into FMAs, so that the two kernels compute
// the same bits and the count always equals what is emitted.
#pragma once

#include "config.h"


struct Ellipse {
  float mx, my;          // centre, pixels
  float sxx, sxy, syy;   // 2D covariance (the conic's inverse)
  float t;               // level: d^T cov^-1 d <= t where alpha >= 1/255
};

// False when the Gaussian can never reach alpha 1/255 (o < 1/255) or its conic is degenerate.
__device__ inline bool ellipse_of(float mx, float my, float4 conic_opacity, Ellipse& e) {
  const float a = conic_opacity.x, b = conic_opacity.y, c = conic_opacity.z, o = conic_opacity.w;
  const float det = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, b));
  if (!(o >= ALPHA_MIN) || !(det > 0.f)) return false;
  const float level = __fmul_rn(2.f * (1.f + LEVEL_MARGIN), __logf(__fmul_rn(255.f, o)));
  e = {mx, my, __fdiv_rn(c, det), __fdiv_rn(-b, det), __fdiv_rn(a, det), fmaxf(level, 0.f)};
  return true;
}

// Tiles [t0, t1) holding the pixel centres (integers) in [lo, hi] of an axis of `size` pixels.
__device__ inline bool pixel_span(float lo, float hi, int size, int& t0, int& t1) {
  const float first = fmaxf(ceilf(__fsub_rn(lo, SPAN_MARGIN)), 0.f);
  const float last = fminf(floorf(__fadd_rn(hi, SPAN_MARGIN)), size - 1.f);
  if (!(first <= last)) return false;
  t0 = (int)first / TILE_SIZE;
  t1 = (int)last / TILE_SIZE + 1;
  return true;
}

__device__ inline bool snug_rect(const Ellipse& e, int width, int height, int& x0, int& y0, int& x1, int& y1) {
  const float ex = __fsqrt_rn(__fmul_rn(e.t, e.sxx)), ey = __fsqrt_rn(__fmul_rn(e.t, e.syy));
  return pixel_span(__fsub_rn(e.mx, ex), __fadd_rn(e.mx, ex), width, x0, x1) &&
         pixel_span(__fsub_rn(e.my, ey), __fadd_rn(e.my, ey), height, y0, y1);
}

// The ellipse's span along u within the band v in [v0, v1] (offsets from the centre), for
// covariance entries suu, suv, svv: u | v runs over k v +- s sqrt(t - v^2 / svv), and its
// extremes over the band sit where the ellipse's own extremes are, clamped into the band.
__device__ inline bool band_span(float suu, float suv, float svv, float t, float v0, float v1, float& lo,
                                 float& hi) {
  const float ev = __fsqrt_rn(__fmul_rn(t, svv));
  v0 = fmaxf(v0, -ev);
  v1 = fminf(v1, ev);
  if (!(v0 <= v1)) return false;
  const float k = __fdiv_rn(suv, svv), s = __fsqrt_rn(fmaxf(__fsub_rn(suu, __fmul_rn(suv, k)), 0.f));
  const float v_top = __fmul_rn(suv, __fsqrt_rn(__fdiv_rn(t, suu)));  // v of the point with the largest u
  const float vh = fminf(fmaxf(v_top, v0), v1), vl = fminf(fmaxf(-v_top, v0), v1);
  auto half_width = [&](float v) {
    return __fmul_rn(s, __fsqrt_rn(fmaxf(__fsub_rn(t, __fdiv_rn(__fmul_rn(v, v), svv)), 0.f)));
  };
  hi = __fadd_rn(__fmul_rn(k, vh), half_width(vh));
  lo = __fsub_rn(__fmul_rn(k, vl), half_width(vl));
  return true;
}

// accutile: calls emit(tx, ty) for every tile the ellipse touches inside its snug box
// [x0, x1) x [y0, y1); returns how many.
template <typename Emit>
__device__ inline int accutile(const Ellipse& e, int width, int height, int x0, int y0, int x1, int y1, Emit emit) {
  const bool rows = (y1 - y0) <= (x1 - x0);  // walk the shorter side
  const int n0 = rows ? y0 : x0, n1 = rows ? y1 : x1;
  const int size_line = rows ? height : width, size_span = rows ? width : height;
  const float m_line = rows ? e.my : e.mx, m_span = rows ? e.mx : e.my;
  const float s_span = rows ? e.sxx : e.syy, s_line = rows ? e.syy : e.sxx;
  int count = 0;
  for (int n = n0; n < n1; ++n) {
    const float p0 = (float)(n * TILE_SIZE), p1 = fminf((float)(n * TILE_SIZE + TILE_SIZE - 1), size_line - 1.f);
    float lo, hi;
    int t0, t1;
    if (!band_span(s_span, e.sxy, s_line, e.t, __fsub_rn(p0, m_line), __fsub_rn(p1, m_line), lo, hi)) continue;
    if (!pixel_span(__fadd_rn(m_span, lo), __fadd_rn(m_span, hi), size_span, t0, t1)) continue;
    for (int m = t0; m < t1; ++m) rows ? emit(m, n) : emit(n, m);
    count += t1 - t0;
  }
  return count;
}
