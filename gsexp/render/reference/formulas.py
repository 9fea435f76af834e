"""The three blend formulations: how one (Gaussian, pixel) pair's alpha is computed.

Each formula maps `Rows` (per-pair Gaussian data) and intra-tile pixel coordinates
(u, v), broadcast against each other, to (alpha, keep). `keep` is False where the pair is
skipped (vanilla: power > 0 or alpha < 1/255; the matrix forms clamp power to <= 0 instead,
since their rounding can push it above 0 at a Gaussian's own centre). The same code serves the dense pass
([pairs, 1] x [1, 256]) and the sparse recompute ([entries] x [entries]), so both see
bit-identical values.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from gsexp.render.constants import ALPHA_MAX, ALPHA_MIN, BLENDS, LOG_ALPHA_MIN, TILE_SIZE
from gsexp.render.reference.precision import check_precision, round_operand


class Rows(NamedTuple):
    mx: torch.Tensor  # mean, INRIA pixel coordinates
    my: torch.Tensor
    a: torch.Tensor   # conic (a, b, c): power = -a/2 dx^2 - b dx dy - c/2 dy^2
    b: torch.Tensor
    c: torch.Tensor
    o: torch.Tensor   # opacity
    ox: torch.Tensor  # pixel coordinates of the tile's first pixel
    oy: torch.Tensor


Formula = Callable[[Rows, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def _alpha_and_keep(power, opacity):
    """alpha = min(0.99, o exp(power)); skip power > 0 and alpha < 1/255.

    Written with C's semantics, as the kernels are: a NaN power passes both tests (every
    comparison with NaN is false) and fminf turns a NaN alpha into 0.99. That is how a
    reduced-precision overflow shows up in a real kernel (the fp16 collapse)."""
    alpha = torch.fmin(opacity * torch.exp(power), torch.full_like(power, ALPHA_MAX))
    return alpha, ~(power > 0) & ~(alpha < ALPHA_MIN)


def _clamp_max(x, limit):
    """x > limit ? limit : x, as the kernels write it: a NaN stays NaN (the fp16 collapse)."""
    return torch.where(x > limit, limit, x)


def vanilla_power(r: Rows, u, v):
    dx = r.mx - (r.ox + u)
    dy = r.my - (r.oy + v)
    return -0.5 * (r.a * dx * dx + r.c * dy * dy) - r.b * dx * dy


def vanilla(r: Rows, u, v):
    return _alpha_and_keep(vanilla_power(r, u, v), r.o)


TILE_CENTER = (TILE_SIZE - 1) / 2  # G2L reference point: offsets and coordinates stay within +-7.5


def tile_frame(r: Rows, u, v, g2l: bool):
    """Mean offset and pixel coordinates relative to the tile centre (G2L) or the image origin.

    Tile-centred coordinates keep u^2, v^2 <= 56 and the constant term small, which is
    what lets fp16 operands work at all."""
    if g2l:
        cx, cy = r.ox + TILE_CENTER, r.oy + TILE_CENTER
        return r.mx - cx, r.my - cy, u - TILE_CENTER, v - TILE_CENTER
    return r.mx, r.my, r.ox + u, r.oy + v


def _quadratic(r: Rows, mx, my, log_o=None, const_scale: float = 1.0):
    """Power's coefficients in pixel coordinates: const + lx u + ly v + qx u^2 + qy v^2 + qxy u v
    (for TC-GS's beta: const includes ln(o) and comes scaled by 1/3).

    Computed in float64 and rounded once, as a careful per-pair setup would: the constant
    and linear terms are large and cancel in the dot product, so their own rounding is the
    whole fp32 error budget."""
    a, b, c, mx, my = (t.double() for t in (r.a, r.b, r.c, mx, my))
    const = -0.5 * a * mx * mx - 0.5 * c * my * my - b * mx * my
    if log_o is not None:
        const = const + log_o.double()
    const = const * const_scale
    dtype = r.a.dtype
    return tuple(t.to(dtype) for t in (const, a * mx + b * my, c * my + b * mx)) + (-0.5 * r.a, -0.5 * r.c, -r.b)


def _dot(gaussian_vec, pixel_vec, precision: str):
    """Tensor-core dot product: operands rounded to `precision`, fp32 accumulation in order."""
    acc = None
    for g, p in zip(gaussian_vec, pixel_vec):
        term = round_operand(g, precision) * round_operand(p, precision)
        acc = term if acc is None else acc + term
    return acc


def gemm(precision: str = "fp32", g2l: bool = True) -> Formula:
    """GEMM-GS: power = (6-vector per Gaussian) . (1, u, v, u^2, v^2, uv)."""

    def power(r: Rows, u, v):
        mx, my, pu, pv = tile_frame(r, u, v, g2l)
        const, lx, ly, qx, qy, qxy = _quadratic(r, mx, my)
        one = torch.ones_like(pu)
        return _dot((const, lx, ly, qx, qy, qxy), (one, pu, pv, pu * pu, pv * pv, pu * pv), precision)

    def formula(r: Rows, u, v):
        return _alpha_and_keep(_clamp_max(power(r, u, v), 0.0), r.o)

    formula.exponent = power
    return formula


def tcgs(precision: str = "fp32", g2l: bool = True, early_cull: bool = True) -> Formula:
    """TC-GS: beta = ln(o) + power as an 8-vector dot product, the constant split in thirds
    (so each third stays small enough for fp16); EarlyCull tests beta before any exp."""

    def beta_of(r: Rows, u, v):
        mx, my, pu, pv = tile_frame(r, u, v, g2l)
        k3, lx, ly, qx, qy, qxy = _quadratic(r, mx, my, torch.log(r.o), const_scale=1 / 3)
        one = torch.ones_like(pu)
        return _dot((qx, qy, qxy, lx, ly, k3, k3, k3), (pu * pu, pv * pv, pu * pv, pu, pv, one, one, one), precision)

    def formula(r: Rows, u, v):
        beta = _clamp_max(beta_of(r, u, v), torch.log(r.o))  # power = beta - ln(o) <= 0
        # C semantics as in _alpha_and_keep: a NaN beta passes every test, alpha 0.99.
        alpha = torch.fmin(torch.exp(beta), torch.full_like(beta, ALPHA_MAX))
        passes = ~(beta < LOG_ALPHA_MIN) if early_cull else ~(alpha < ALPHA_MIN)
        return alpha, passes

    formula.exponent = beta_of
    return formula


def make_formula(blend: str, precision: str = "fp32", g2l: bool = True, early_cull: bool = True,
                 half_blend: bool = False, backward: str = "exact") -> Formula:
    """The formula for a blend variant. `formula.exact` says its alpha equals vanilla's up to
    fp32 rounding, so the blend may skip pairs that provably stay below 1/255;
    `formula.half_blend` asks the blend for TC-GS's fp16 accumulation of T and colour;
    `formula.backward` picks the blend backward (exact, or the GEMM form: gemm_backward.py),
    which reads `formula.exponent` (power, or TC-GS's beta, before its clamp)."""
    check_precision(precision)  # which switches a blend takes: gsexp.render.settings
    if blend == "vanilla":
        formula = vanilla
    elif blend == "gemm":
        formula = gemm(precision, g2l)
    elif blend == "tcgs":
        formula = tcgs(precision, g2l, early_cull)
    else:
        raise ValueError(f"render: unknown blend {blend!r}; choose one of {', '.join(BLENDS)}")

    def wrapped(r: Rows, u, v):
        return formula(r, u, v)

    # Without G2L even fp32 loses enough to cross thresholds: evaluate every pair as the kernel does.
    wrapped.exact = precision == "fp32" and (blend == "vanilla" or g2l)
    wrapped.half_blend = half_blend
    wrapped.blend, wrapped.backward = blend, backward
    wrapped.exponent = getattr(formula, "exponent", vanilla_power)
    return wrapped


assert math.isclose(LOG_ALPHA_MIN, math.log(ALPHA_MIN))
