"""Emulation of the tensor-core operand formats on any device.

Values stay float32 tensors but are rounded to what fits in the format; gradients pass
straight through (the shared backward is exact fp32).
"""
import torch

from gsexp.render.constants import PRECISIONS


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"render: unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    return precision


def _round_tf32(x: torch.Tensor) -> torch.Tensor:
    # cvt.rn.tf32.f32: keep 10 mantissa bits, ties to even (on the magnitude bits). On sm_90 it
    # is one instruction (F2FP.TF32); cvt.rna (ties away) expands to three.
    bits = x.contiguous().view(torch.int32)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    finite = torch.isfinite(x)
    return torch.where(finite, rounded.view(torch.float32), x)


def round_operand(x: torch.Tensor, precision: str) -> torch.Tensor:
    """`x` rounded to the operand format; fp16 overflows to +-inf like the hardware cast."""
    if precision == "fp32":
        return x
    with torch.no_grad():
        r = x.half().float() if precision == "fp16" else _round_tf32(x.float())
    return x + (r - x).detach()  # straight-through: value rounded, gradient exact
