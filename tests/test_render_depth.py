"""rasterizer.depth on the torch reference: out.depth_accumulated = sum_i w_i z_i and out.depth =
that / sum_i w_i (w_i = alpha_i T_i), against a brute-force float64 pixel loop; gradients by
gradcheck; off by default, and the image unchanged by it; every variant takes the switch (the CUDA
blends' check against this reference is tests/test_cuda_depth.py)."""
import dataclasses

import pytest
import torch

from gsexp.render import make_settings, render
from gsexp.render.constants import ALPHA_MAX, ALPHA_MIN, T_MIN
from gsexp.render.reference import preprocess
from gsexp.render.settings import reference_of
from render_helpers import random_scene

BACKGROUND = (0.2, 0.5, 0.9)


def brute_force_depth(g, cam):
    """(sum w z, sum w) per pixel: every Gaussian against every pixel, one at a time in the
    rasterizers' order (float32 depth, ties by index), 3DGS's alpha and stopping rules."""
    proj = preprocess(g, cam)
    ys, xs = torch.meshgrid(torch.arange(cam.height, dtype=torch.float64),
                            torch.arange(cam.width, dtype=torch.float64), indexing="ij")
    T = torch.ones_like(xs)
    done = torch.zeros_like(xs, dtype=torch.bool)
    acc, weight = torch.zeros_like(xs), torch.zeros_like(xs)
    drawn = torch.nonzero(proj.radii > 0).flatten().tolist()
    for i in sorted(drawn, key=lambda k: (proj.depths[k].float().item(), k)):
        a, b, c = proj.conics[i]
        dx, dy = proj.means2d[i, 0] - xs, proj.means2d[i, 1] - ys
        power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
        alpha = (proj.opacities[i] * torch.exp(power)).clamp(max=ALPHA_MAX)
        use = ~done & (power <= 0) & (alpha >= ALPHA_MIN)
        stop = use & (T * (1 - alpha) < T_MIN)
        done, use = done | stop, use & ~stop
        w = torch.where(use, alpha * T, 0.0)
        acc, weight, T = acc + w * proj.depths[i], weight + w, torch.where(use, T * (1 - alpha), T)
    return acc, weight


@pytest.mark.parametrize("intersect", ["aabb", "accutile"])
def test_depth_equals_the_brute_force_sums(intersect):
    g, cam = random_scene(21, 300, 72, 56, 1)
    g64 = g.map(lambda t: t.double())
    out = render(g64, cam, intersect=intersect, depth=True, background=BACKGROUND)
    acc, weight = brute_force_depth(g64, cam)
    assert (weight > 0.5).float().mean() > 0.2  # much of the image is covered
    # 1e-9: both float64; aabb may cut faint tails the brute force keeps, compare where it does not
    same = (out.alpha - weight).abs() < 1e-12
    assert same.float().mean() > (0.99 if intersect == "aabb" else 0.999999)
    assert (out.depth_accumulated - acc)[same].abs().max() < 1e-9
    covered = same & (weight > 1e-3)
    assert (out.depth - acc / weight)[covered].abs().max() < 1e-9
    z = preprocess(g64, cam).depths[preprocess(g64, cam).radii > 0]
    assert (out.depth[covered] >= z.min() - 1e-9).all() and (out.depth[covered] <= z.max() + 1e-9).all()
    assert (out.depth[out.alpha == 0] == 0).all()


def test_depth_is_off_by_default_and_leaves_the_image_alone():
    g, cam = random_scene(2)
    plain = render(g, cam, background=BACKGROUND)
    assert plain.depth is None and plain.depth_accumulated is None
    with_depth = render(g, cam, depth=True, background=BACKGROUND)
    assert torch.equal(plain.image, with_depth.image) and torch.equal(plain.alpha, with_depth.alpha)
    assert with_depth.depth.shape == (cam.height, cam.width)


def test_depth_gradients_by_gradcheck():
    g, cam = random_scene(8, 5, 16, 12, 1)
    g = dataclasses.replace(g, log_scales=g.log_scales + 1.5).map(lambda t: t.double())
    names = ("means", "log_scales", "opacity_logits")

    def depths(*xs):
        out = render(dataclasses.replace(g, **dict(zip(names, xs))), cam, depth=True)
        return out.depth, out.depth_accumulated

    xs = [getattr(g, k).detach().clone().requires_grad_() for k in names]
    assert render(g, cam).alpha.max() > 0.3
    assert torch.autograd.gradcheck(depths, xs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("backward", ["exact", "gemm_fp32", "gemm_tf32"])
def test_every_variant_takes_depth(backward):
    for name in ("torch", "vanilla", "gemm_gs", "tc_gs"):
        settings = make_settings(name, depth=True, backward=backward)
        assert settings.depth and reference_of(settings).depth
        assert not make_settings(name, backward=backward).depth
