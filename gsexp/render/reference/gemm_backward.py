"""The blend backward in GEMM form (issue 20), on the reference: what a tensor-core backward
computes, with its operand rounding emulated.

In tile-centred coordinates (pu, pv) = pixel - tile centre, a pair's exponent is
    power = const + lx pu + ly pv + qx pu^2 + qy pv^2 + qxy pu pv = v_g . u_p
so a tile's gradient of v is one GEMM: dL/dv_g = sum_p dL/dpower_gp u_p, the Gaussians x
256-pixel matrix of dL/dpower times the 256 x 6 pixel matrix. u_p is exact in every operand
format (multiples of 1/4 up to 56.25); only dL/dpower is rounded. The products accumulate in
fp32. dL/dv then goes to the 2D mean and the conic by the chain rule of v's definition
(formulas._quadratic), per (Gaussian, tile) pair, and the opacity's share (alpha = o exp(power),
or TC-GS's beta = ln o + power) is summed directly.

fp16 has too little range for dL/dpower (often 1e-9 and below), so each pair's row is scaled by
a power of two that puts its largest value in [2^14, 2^15) before the rounding, and unscaled
exactly after it; tf32 and bf16 keep fp32's range and need no scale.
"""
from __future__ import annotations

import torch

from gsexp.render.constants import ALPHA_MAX
from gsexp.render.reference.formulas import Rows, tile_frame
from gsexp.render.reference.precision import round_operand

FORMATS = {"gemm_fp32": "fp32", "gemm_tf32": "tf32", "gemm_bf16": "bf16", "gemm_fp16": "fp16"}


def round_format(x: torch.Tensor, fmt: str) -> torch.Tensor:
    if fmt == "bf16":
        return x.bfloat16().to(x.dtype)
    return round_operand(x, fmt)


def scale_rows(values: torch.Tensor, rows: torch.Tensor, num_rows: int) -> torch.Tensor:
    """A power of two per row that brings the row's largest |value| into [2^14, 2^15)."""
    peak = torch.zeros(num_rows, dtype=values.dtype, device=values.device)
    peak.scatter_reduce_(0, rows, values.abs(), reduce="amax")
    _, exponent = torch.frexp(peak)  # peak < 2^exponent
    return torch.where(peak > 0, torch.ldexp(torch.ones_like(peak), 15 - exponent), torch.ones_like(peak))


class GemmBackward:
    """Collects each round's contributing entries, then runs the GEMM and the chain rule."""

    def __init__(self, backward: str, blend: str):
        self.fmt, self.blend = FORMATS[backward], blend
        self.pairs, self.d_power, self.u, self.v = [], [], [], []
        self.d_opacity = []  # (pair, dL/do) of the entries: the part outside the GEMM

    def add(self, rows: Rows, exponent, u, v, alpha, d_alpha, pair) -> None:
        """One round's entries. exponent: the formula's power (vanilla, gemm) or beta (tcgs)
        before its clamp; alpha: the forward's; d_alpha: dL/dalpha."""
        free = alpha < ALPHA_MAX  # the 0.99 clamp passes no gradient
        d_x = torch.where(free, d_alpha * alpha, torch.zeros_like(alpha))
        if self.blend == "tcgs":  # beta = min(ln o + power, ln o): ln o takes every d beta
            clamped = exponent > torch.log(rows.o)
            d_o = d_x / rows.o
        else:  # alpha = o exp(min(power, 0))
            clamped = exponent > 0
            d_o = torch.where(free, d_alpha * alpha / rows.o, torch.zeros_like(alpha))
        self.d_power.append(torch.where(clamped, torch.zeros_like(d_x), d_x))
        self.d_opacity.append(d_o)
        _, _, pu, pv = tile_frame(rows, u, v, g2l=True)  # the backward always works tile-centred
        self.pairs.append(pair)
        self.u.append(pu)
        self.v.append(pv)

    def grads(self, pair_rows: Rows, gauss_ids, means2d, conics, opacities):
        """dL/d(means2d, conics, opacities) from every entry added; pair_rows: the Gaussian data
        of every (Gaussian, tile) pair (blend.gather_rows), gauss_ids: each pair's Gaussian."""
        d_means2d, d_conics, d_opacities = (torch.zeros_like(x) for x in (means2d, conics, opacities))
        if not self.pairs:
            return d_means2d, d_conics, d_opacities
        pair, d_power, pu, pv = (torch.cat(x) for x in (self.pairs, self.d_power, self.u, self.v))
        num_pairs = len(gauss_ids)
        row_scale = scale_rows(d_power, pair, num_pairs) if self.fmt == "fp16" else None
        a_op = round_format(d_power if row_scale is None else d_power * row_scale.index_select(0, pair), self.fmt)
        columns = (torch.ones_like(pu), pu, pv, pu * pu, pv * pv, pu * pv)
        products = torch.stack([a_op * round_format(c, self.fmt) for c in columns], 1)
        dv = torch.zeros(num_pairs, 6, dtype=means2d.dtype, device=means2d.device).index_add_(0, pair, products)
        if row_scale is not None:  # exact: the scale is a power of two
            dv = dv / row_scale[:, None]
        d_mean, d_conic = chain_rule(dv, pair_rows)
        d_means2d.index_add_(0, gauss_ids, d_mean)
        d_conics.index_add_(0, gauss_ids, d_conic)
        d_opacities.index_add_(0, gauss_ids.index_select(0, pair), torch.cat(self.d_opacity))
        return d_means2d, d_conics, d_opacities


def chain_rule(dv, r: Rows):
    """dL/d(mean, conic) of each pair from dL/d(const, lx, ly, qx, qy, qxy) (formulas._quadratic,
    in the tile-centred frame of G2L: m' = mean - tile centre)."""
    d_const, d_lx, d_ly, d_qx, d_qy, d_qxy = dv.unbind(1)
    mx, my, _, _ = tile_frame(r, 0.0, 0.0, g2l=True)
    a, b, c = r.a, r.b, r.c
    lx, ly = a * mx + b * my, c * my + b * mx
    d_a = -0.5 * mx * mx * d_const + mx * d_lx - 0.5 * d_qx
    d_b = -mx * my * d_const + my * d_lx + mx * d_ly - d_qxy
    d_c = -0.5 * my * my * d_const + my * d_ly - 0.5 * d_qy
    d_mx = -lx * d_const + a * d_lx + b * d_ly
    d_my = -ly * d_const + b * d_lx + c * d_ly
    return torch.stack([d_mx, d_my], 1), torch.stack([d_a, d_b, d_c], 1)
