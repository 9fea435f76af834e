"""The reference rasterizer against a naive loop, and its blend formulations against each other."""
import math

import pytest
import torch

from gsexp.gaussians import Gaussians
from gsexp.gaussians.sh import sh_basis
from gsexp.metrics import psnr
from gsexp.render import render
from render_helpers import dense_render64, naive_render, random_scene, stable_pixels

GRAD_FIELDS = ("means", "log_scales", "quats", "opacity_logits", "sh")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vanilla_matches_naive_pixel_loop(seed):
    g, cam = random_scene(seed)
    bg = (0.2, 0.5, 0.9)
    out = render(g, cam, background=bg)
    image, alpha = naive_render(g, cam, bg)
    assert out.image.shape == (3, cam.height, cam.width)
    assert out.alpha.mean() > 0.05  # the scene is actually in view
    ok = stable_pixels(g, cam)
    assert ok.float().mean() > 0.97
    # 1e-5: both are fp32; they differ only in the order of a few float operations.
    assert (out.image - image)[:, ok].abs().max() < 1e-5
    assert (out.alpha - alpha)[ok].abs().max() < 1e-5


@pytest.mark.parametrize("seed", [0, 1])
def test_half_blend_matches_naive_loop_with_fp16_state(seed):
    """half_blend (TC-GS's fp16 T and colour) against the pixel loop rounding the same state."""
    g, cam = random_scene(seed)
    with torch.no_grad():
        out = render(g, cam, blend="tcgs", half_blend=True)
        full = render(g, cam, blend="tcgs")
    image, _ = naive_render(g, cam, half_state=True)
    ok = stable_pixels(g, cam)
    # An fp16 step is 2^-11 relative: alpha's fp32 rounding can move a rounding by one step.
    assert (out.image - image)[:, ok].abs().max() < 2e-3
    assert (out.image - image)[:, ok].abs().mean() < 1e-5
    assert not torch.equal(out.image, full.image)  # the switch does something


def test_half_blend_rules():
    g, cam = random_scene(0)
    with pytest.raises(ValueError, match="applies to blend=tcgs only"):
        render(g, cam, blend="gemm", half_blend=True)
    with pytest.raises(ValueError, match="rendering only"):
        render(g.map(lambda t: t.requires_grad_()), cam, blend="tcgs", half_blend=True)


def _grads(g: Gaussians, cam, weights, **kw):
    g = g.detach().requires_grad_()
    out = render(g, cam, **kw)
    (out.image * weights).sum().backward()
    return out, {k: getattr(g, k).grad for k in GRAD_FIELDS}, out.means2d.grad


@pytest.mark.parametrize("seed", [3, 4, 5])
@pytest.mark.parametrize("blend,kw", [("gemm", {}), ("tcgs", {}), ("tcgs", {"early_cull": False})])
def test_formulations_equal_vanilla_in_fp32(seed, blend, kw):
    g, cam = random_scene(seed, n=300, width=72, height=56)
    ok = stable_pixels(g, cam)
    assert ok.float().mean() > 0.97
    # The loss covers stable pixels only, so a legitimately flipped decision elsewhere
    # cannot move the gradients.
    weights = torch.rand(3, cam.height, cam.width, generator=torch.Generator().manual_seed(seed)) * ok
    ref, ref_grads, ref_m2d = _grads(g, cam, weights)
    out, grads, m2d = _grads(g, cam, weights, blend=blend, **kw)
    assert (out.image - ref.image)[:, ok].abs().max() < 1e-5
    assert torch.equal(out.n_contrib[ok], ref.n_contrib[ok])
    # gradients: max abs difference within 1e-4 of the tensor's largest entry
    for name in GRAD_FIELDS:
        scale = ref_grads[name].abs().max()
        assert (grads[name] - ref_grads[name]).abs().max() <= 1e-4 * scale, name
    assert (m2d - ref_m2d).abs().max() <= 1e-4 * ref_m2d.abs().max()


@pytest.mark.parametrize("blend", ["gemm", "tcgs"])
def test_global_coordinates_lose_fp32_precision_but_stay_close(blend):
    # Without G2L the constant term grows with the squared pixel coordinate and cancels:
    # still close in fp32 on a small image, but not to 1e-5 (recorded in experiments/).
    g, cam = random_scene(3, n=300, width=72, height=56)
    with torch.no_grad():
        ref = render(g, cam).image
        out = render(g, cam, blend=blend, g2l=False).image
    assert psnr(out, ref) > 50.0


@pytest.mark.parametrize("seed", [6, 7])
def test_reference_gradients_match_float64_autograd(seed):
    g, cam = random_scene(seed, n=40, width=36, height=28, sh_degree=1)
    weights = torch.rand(3, cam.height, cam.width, generator=torch.Generator().manual_seed(seed)) \
        * stable_pixels(g, cam)
    bg = (0.3, 0.1, 0.6)
    g32 = g.detach().requires_grad_()
    (render(g32, cam, background=bg).image * weights).sum().backward()
    g64 = g.map(lambda t: t.double()).requires_grad_()
    (dense_render64(g64, cam, bg)[0] * weights.double()).sum().backward()
    for name in GRAD_FIELDS:
        a, b = getattr(g32, name).grad.double(), getattr(g64, name).grad
        # fp32 against fp64: 1e-3 of the tensor's largest entry
        assert (a - b).abs().max() <= 1e-3 * b.abs().max(), (name, (a - b).abs().max(), b.abs().max())


def test_no_grad_and_grad_paths_agree():
    g, cam = random_scene(8, n=200, width=64, height=48)
    with torch.no_grad():
        a = render(g, cam).image
    b = render(g.detach().requires_grad_(), cam)
    # dense compositing (no grad) and per-entry compositing sum in different orders
    assert (a - b.image.detach()).abs().max() < 1e-6
    with torch.no_grad():
        assert torch.equal(render(g, cam).n_contrib, b.n_contrib)


def test_means2d_gradient_is_screen_space():
    g, cam = random_scene(9, n=100, width=48, height=40)
    g = g.detach().requires_grad_()
    out = render(g, cam)
    out.image.sum().backward()
    assert out.means2d.grad is not None and out.means2d.grad.shape == (len(g), 2)
    assert (out.means2d.grad[~out.visible] == 0).all()
    assert out.means2d.grad[out.visible].abs().sum() > 0


def test_empty_and_behind_camera():
    g, cam = random_scene(10, n=5)
    far = g.map(lambda t: t.clone())
    far.means[:] = cam.center + 100.0 * (cam.center / cam.center.norm())  # all behind the camera
    out = render(far, cam, background=(0.25, 0.5, 0.75))
    assert (out.radii == 0).all()
    assert torch.allclose(out.image, torch.tensor([0.25, 0.5, 0.75])[:, None, None].expand(3, cam.height, cam.width))


def test_sh_basis_is_orthonormal():
    # Monte-Carlo check of the SH constants: E[Y_i Y_j] over the sphere = delta_ij / (4 pi)
    dirs = torch.nn.functional.normalize(torch.randn(400_000, 3, dtype=torch.float64,
                                                     generator=torch.Generator().manual_seed(0)), dim=1)
    y = sh_basis(dirs, 3)
    gram = (y.T @ y) / len(dirs) * 4 * math.pi
    assert torch.allclose(gram, torch.eye(16, dtype=torch.float64), atol=0.02)


@pytest.mark.parametrize("kw,match", [
    ({"blend": "fast"}, "rasterizer.blend: 'fast' is not one of vanilla, gemm, tcgs"),
    ({"blend": "tcgs", "precision": "bf16"}, "rasterizer.precision: 'bf16' is not one of"),
    ({"precision": "fp16"}, "applies to blend=gemm or tcgs"),
    ({"backend": "vulkan"}, "backend must be torch or cuda"),
    ({"backend": "cuda", "g2l": False}, "vanilla has no switch 'g2l' \\(it is a switch of torch, gemm_gs, tc_gs\\)"),
    ({"background": (1, 1)}, "background must be 3 values"),
])
def test_bad_render_arguments(kw, match):
    g, cam = random_scene(0, n=5)
    with pytest.raises(ValueError, match=match):
        render(g, cam, **kw)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("blend", ["vanilla", "gemm", "tcgs"])
def test_reference_runs_on_cuda_like_on_cpu(blend):
    g, cam = random_scene(11, n=400, width=80, height=64)
    ok = stable_pixels(g, cam)
    weights = torch.rand(3, cam.height, cam.width, generator=torch.Generator().manual_seed(11)) * ok
    cpu, cpu_grads, _ = _grads(g, cam, weights, blend=blend)
    gpu, gpu_grads, _ = _grads(g.to("cuda"), cam, weights.cuda(), blend=blend)
    assert (gpu.image.cpu() - cpu.image)[:, ok].abs().max() < 1e-5
    for name in GRAD_FIELDS:
        scale = cpu_grads[name].abs().max()
        assert (gpu_grads[name].cpu() - cpu_grads[name]).abs().max() <= 1e-4 * scale, name
    with torch.no_grad():  # reduced precision: same emulation, but exp/log may differ by an ulp
        a = render(g, cam, blend="tcgs", precision="fp16").image
        b = render(g.to("cuda"), cam, blend="tcgs", precision="fp16").image.cpu()
    assert psnr(a, b) > 60.0


def test_both_backends_share_stage_names_and_the_screen_space_gradient():
    """The reference reports the CUDA backend's stages (backward after one) and its means2d
    keeps .grad without the caller asking, as the CUDA backend's leaf does."""
    from gsexp.render import STAGES, make_settings

    g, cam = random_scene(0)
    g = g.map(lambda t: t.requires_grad_())
    out = render(g, cam, make_settings("torch", timing=True))
    assert set(out.stage_ms) == set(STAGES) - {"backward"}
    out.image.sum().backward()
    assert set(out.stage_ms) == set(STAGES) and all(v >= 0 for v in out.stage_ms.values())
    assert out.means2d.grad is not None and out.means2d.grad.shape == (len(g), 2)
    assert render(g, cam, make_settings("torch")).stage_ms == {}  # timing is opt-in


def test_render_takes_settings_or_keywords_not_both():
    from gsexp.render import make_settings

    g, cam = random_scene(0, n=5)
    a = render(g, cam, make_settings("torch", blend="gemm")).image
    b = render(g, cam, blend="gemm").image
    assert torch.equal(a, b)
    with pytest.raises(TypeError, match="in the settings object"):
        render(g, cam, make_settings("torch"), blend="gemm")
