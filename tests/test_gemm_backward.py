"""The blend backward in GEMM form (reference/gemm_backward.py, issue 20): in fp32 it is
autograd's gradient; with rounded operands its error is bounded; fp16's row scaling keeps it
bounded whatever the gradients' magnitude."""
import pytest
import torch
from render_helpers import random_scene

from gsexp.errors import InvalidCombination
from gsexp.render import render
from gsexp.render.reference.gemm_backward import scale_rows
from gsexp.render.settings import TorchSettings, make_settings

PARAMS = ("means", "log_scales", "quats", "opacity_logits", "sh")


def gradients(g, cam, settings, loss_scale: float = 1.0) -> dict:
    leaves = g.map(lambda t: t.detach().clone().requires_grad_())
    gen = torch.Generator().manual_seed(0)
    w_img = torch.rand(3, cam.height, cam.width, generator=gen) * loss_scale
    w_alpha = torch.rand(cam.height, cam.width, generator=gen) * loss_scale
    out = render(leaves, cam, settings, background=(0.3, 0.1, 0.6))
    ((out.image * w_img).sum() + (out.alpha * w_alpha).sum()).backward()
    return {**{k: getattr(leaves, k).grad for k in PARAMS}, "means2d": out.means2d.grad}


def relative_errors(blend: str, backward: str, seed: int, loss_scale: float = 1.0) -> dict:
    g, cam = random_scene(seed, n=120, width=48, height=40)
    exact = gradients(g, cam, TorchSettings(blend=blend), loss_scale)
    gemm = gradients(g, cam, TorchSettings(blend=blend, backward=backward), loss_scale)
    assert exact["means"].abs().max() > 0
    return {k: ((gemm[k] - exact[k]).norm() / exact[k].norm()).item() for k in exact}


@pytest.mark.parametrize("blend", ["vanilla", "gemm", "tcgs"])
@pytest.mark.parametrize("seed", [0, 1])
def test_gemm_form_in_fp32_is_autograds_gradient(blend, seed):
    errors = relative_errors(blend, "gemm_fp32", seed)
    assert errors["sh"] == 0.0  # colour gradients take the same path
    assert max(errors.values()) <= 1e-5, errors


@pytest.mark.parametrize("backward,bound", [("gemm_tf32", 2e-3), ("gemm_fp16", 2e-3), ("gemm_bf16", 1.5e-2)])
def test_rounded_operands_stay_within_their_bound(backward, bound):
    errors = relative_errors("tcgs", backward, seed=2)
    print(backward, {k: f"{v:.1e}" for k, v in errors.items()})
    assert max(errors.values()) <= bound, errors
    assert errors["means2d"] > 1e-6  # the rounding is really emulated


def test_fp16_rows_are_scaled_so_tiny_gradients_survive():
    """dL/dpower of 1e-12 and below is zero in plain fp16; scaled rows keep the same error."""
    unit = relative_errors("tcgs", "gemm_fp16", seed=3)
    tiny = relative_errors("tcgs", "gemm_fp16", seed=3, loss_scale=1e-9)
    assert max(tiny.values()) <= 2e-3 and abs(tiny["means2d"] - unit["means2d"]) <= 0.1 * unit["means2d"]


def test_row_scales_are_powers_of_two_that_fill_fp16():
    values = torch.tensor([3e-9, -7e-9, 0.0, 2.5, 1e5, 0.0])
    rows = torch.tensor([0, 0, 1, 2, 2, 3])
    scale = scale_rows(values, rows, 4)
    peak = torch.tensor([7e-9, 0.0, 1e5, 0.0])
    assert torch.equal(scale[peak == 0], torch.ones(2))
    scaled = peak[peak > 0] * scale[peak > 0]
    assert ((scaled >= 2**14) & (scaled < 2**15)).all()
    assert torch.equal(torch.frexp(scale)[0], torch.full_like(scale, 0.5))  # powers of two


def test_cuda_refuses_the_reference_only_backwards():
    with pytest.raises(InvalidCombination, match="rasterizer.backward.*rasterizer=torch"):
        make_settings("tc_gs", backward="gemm_bf16")
    assert make_settings("torch", blend="tcgs", backward="gemm_tf32").formula["backward"] == "gemm_tf32"
