"""Reduced-precision emulation and the TC-GS numerics acceptance on a trained scene."""
import pytest
import torch

from gsexp.gaussians import load_ply
from gsexp.metrics import psnr
from gsexp.render import render
from gsexp.render.reference.precision import round_operand
from gsexp.scene import framing_camera


def test_fp16_rounding_and_overflow():
    x = torch.tensor([1.0, 1 + 2**-11, 1 + 3 * 2**-11, 65504.0, 70000.0, -1e6, 2e-8])
    r = round_operand(x, "fp16")
    assert r.tolist()[:4] == [1.0, 1.0, 1 + 2**-9, 65504.0]  # ties to even
    assert r[4] == float("inf") and r[5] == float("-inf")
    assert r[6] == 0.0  # below the smallest fp16 subnormal / 2


def test_tf32_rounding_keeps_10_mantissa_bits_and_fp32_range():
    x = torch.tensor([1 + 2**-11, 1 + 2**-12, -(1 + 2**-11), 1e30, 1023.0**2, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-20])
    r = round_operand(x, "tf32")
    assert r[0] == 1.0               # a tie goes to the even neighbour (cvt.rn) ...
    assert r[5] == 1 + 2**-9         # ... up when the kept last bit is odd (1 + 2^-10 + half)
    assert r[6] == 1 + 2**-10        # above the tie: up
    assert r[1] == 1.0
    assert r[2] == -1.0
    assert torch.isfinite(r[3]) and abs(r[3] / 1e30 - 1) < 2**-10
    assert r[4] != 1023.0**2 and abs(r[4] - 1023.0**2) <= 1023.0**2 * 2**-11


def test_rounding_is_straight_through_for_gradients():
    x = torch.tensor([1.2345, -3.3], requires_grad=True)
    (round_operand(x, "fp16") * torch.tensor([2.0, 5.0])).sum().backward()
    assert x.grad.tolist() == [2.0, 5.0]


@pytest.fixture(scope="module")
def biker(shared):
    return load_ply(shared / "data/scenes/biker.compressed.ply")


def _psnr_vs_vanilla(g, size, **kw):
    cam = framing_camera(g.means, size, size)
    with torch.no_grad():
        return psnr(render(g, cam, blend="tcgs", **kw).image, render(g, cam).image).item()


def test_tcgs_fp16_with_g2l_is_accurate(biker):
    # TC-GS's claim: with tile-local coordinates fp16 operands are visually lossless.
    assert _psnr_vs_vanilla(biker, 256, precision="fp16", g2l=True) >= 50.0


def test_tcgs_fp16_without_g2l_collapses(biker):
    # Global pixel coordinates square past fp16's 65504 beyond x = 256: the image collapses.
    assert _psnr_vs_vanilla(biker, 1024, precision="fp16", g2l=False) < 20.0


def test_tf32_rounding_matches_round_half_even_in_float64():
    """The emulation against float64 round-half-even to 11 significant bits, on random values of
    every scale and on exact ties (bit 12 set, bits 0-11 clear) of both signs."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1_000_000, generator=g) * torch.exp(torch.randn(1_000_000, generator=g) * 10)
    ties = ((torch.randint(0, 2**23, (100_000,), generator=g, dtype=torch.int32) & ~0x1FFF) | 0x1000 | (127 << 23))
    ties = ties.view(torch.float32)
    x = torch.cat([x, ties, -ties])
    mantissa, exponent = torch.frexp(x.double())
    want = torch.ldexp(torch.round(mantissa * 2**11) / 2**11, exponent)  # torch.round: half to even
    assert torch.equal(round_operand(x, "tf32").double(), want)
