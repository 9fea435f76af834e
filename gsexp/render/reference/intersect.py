"""Which tiles get a Gaussian's list entries (csrc/intersect.cuh computes the same in CUDA).

    aabb      the square of half-size ceil(3 sigma_max) around the mean (vanilla 3DGS)
    snugbox   the exact box of the ellipse where o G(d) = 1/255, i.e. d^T cov^-1 d = 2 ln(255 o)
    accutile  only the tiles that ellipse touches: walk the box's shorter side line by line
              and take each line's span from the ellipse's extent within the line's band

alpha >= 1/255 only inside that ellipse, so snugbox and accutile drop no contribution: a
Gaussian with o < 1/255 has no tiles at all. 3-sigma squares can cut the faint tails of
opaque Gaussians, whose 1/255 level lies at up to sqrt(2 ln 255) = 3.33 sigma.
Spans cover the pixel centres (integers) inside; LEVEL_MARGIN and SPAN_MARGIN widen them so
that the blend's rounding never finds a pixel outside. Everything runs in float64, as in CUDA:
for a thin ellipse the conic's determinant cancels, and a float32 one would shrink the box
by far more than the margins.
"""
from __future__ import annotations

import torch

from gsexp.render.constants import ALPHA_MIN, LEVEL_MARGIN, SPAN_MARGIN, TILE_SIZE


def ellipse(conics: torch.Tensor, opacities: torch.Tensor):
    """(sxx, sxy, syy, level, ok): the 2D covariance (the conic's inverse) and the level of
    the alpha = 1/255 ellipse; ok is False where no pixel can reach 1/255."""
    a, b, c = conics.double().unbind(-1)
    o = opacities.double()
    det = a * c - b * b
    ok = (o >= ALPHA_MIN) & (det > 0)
    det = torch.where(ok, det, torch.ones_like(det))
    level = (2 * (1 + LEVEL_MARGIN) * torch.log(255 * o.clamp_min(ALPHA_MIN))).clamp_min(0)
    return c / det, -b / det, a / det, level, ok


def pixel_span(lo: torch.Tensor, hi: torch.Tensor, size):
    """Tiles [t0, t1) holding the integer pixel centres in [lo, hi] of an axis of `size` pixels."""
    first = torch.ceil(lo - SPAN_MARGIN).clamp_min(0)
    last = torch.minimum(torch.floor(hi + SPAN_MARGIN), torch.as_tensor(size, device=hi.device) - 1.0)
    ok = first <= last
    first, last = torch.where(ok, first, 0).long(), torch.where(ok, last, -1).long()  # empty: [0, 0)
    return first // TILE_SIZE, last // TILE_SIZE + 1, ok


def snug_rect(means2d, sxx, syy, level, width: int, height: int):
    """The snug box's tiles: rect_min, rect_max ([N,2], max exclusive) and where it is non-empty."""
    ex, ey = (level * sxx).sqrt(), (level * syy).sqrt()
    mx, my = means2d.double().unbind(-1)
    x0, x1, ok_x = pixel_span(mx - ex, mx + ex, width)
    y0, y1, ok_y = pixel_span(my - ey, my + ey, height)
    return torch.stack([x0, y0], -1), torch.stack([x1, y1], -1), ok_x & ok_y


def band_span(suu, suv, svv, level, v0, v1):
    """The ellipse's extent (lo, hi) along u within the band of offsets v in [v0, v1]: u | v runs
    over k v +- s sqrt(level - v^2 / svv); the extremes over the band sit where the ellipse's own
    extremes are, clamped into the band."""
    ev = (level * svv).sqrt()
    v0, v1 = torch.maximum(v0, -ev), torch.minimum(v1, ev)
    ok = v0 <= v1
    k = suv / svv
    s = (suu - suv * k).clamp_min(0).sqrt()
    v_top = suv * (level / suu).sqrt()  # v of the point with the largest u
    vh = torch.minimum(torch.maximum(v_top, v0), v1)
    vl = torch.minimum(torch.maximum(-v_top, v0), v1)

    def half_width(v):
        return s * (level - v * v / svv).clamp_min(0).sqrt()

    return k * vl - half_width(vl), k * vh + half_width(vh), ok


def accutile(means2d, sxx, sxy, syy, level, rect_min, rect_max, width: int, height: int):
    """The tiles the ellipse touches inside each snug box: (gauss_ids [M], tile (x, y) [M,2],
    counts [N]), pairs in Gaussian order. Boxes to skip should come in empty (rect_max = rect_min)."""
    n = len(means2d)
    dev = means2d.device
    span = rect_max - rect_min
    rows = span[:, 1] <= span[:, 0]  # walk the shorter side
    lines = torch.where(rows, span[:, 1], span[:, 0]) * (span > 0).all(-1)
    g = torch.repeat_interleave(torch.arange(n, device=dev), lines)
    line = torch.where(rows, rect_min[:, 1], rect_min[:, 0])[g] + torch.arange(len(g), device=dev) \
        - (torch.cumsum(lines, 0) - lines)[g]
    r = rows[g]
    mx, my = means2d.double().unbind(-1)
    size_line = torch.where(r, height, width)
    p0 = (line * TILE_SIZE).double()
    p1 = torch.minimum(p0 + (TILE_SIZE - 1), (size_line - 1).double())
    m_line, m_span = torch.where(r, my[g], mx[g]), torch.where(r, mx[g], my[g])
    s_line, s_span = torch.where(r, syy[g], sxx[g]), torch.where(r, sxx[g], syy[g])
    lo, hi, ok = band_span(s_span, sxy[g], s_line, level[g], p0 - m_line, p1 - m_line)
    t0, t1, ok_span = pixel_span(m_span + lo, m_span + hi, torch.where(r, width, height).double())
    cnt = torch.where(ok & ok_span, t1 - t0, 0)
    which = torch.repeat_interleave(torch.arange(len(g), device=dev), cnt)
    m = t0[which] + torch.arange(len(which), device=dev) - (torch.cumsum(cnt, 0) - cnt)[which]
    tile_xy = torch.stack([torch.where(r[which], m, line[which]), torch.where(r[which], line[which], m)], -1)
    counts = torch.zeros(n, dtype=torch.long, device=dev).index_add_(0, g, cnt)
    return g[which], tile_xy, counts
