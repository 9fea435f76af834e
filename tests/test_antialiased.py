"""rasterizer.antialiased (Mip-Splatting's 2D filter, gsplat's rasterize_mode="antialiased") on
the torch reference: the opacity times sqrt(det S / det(S + 0.3 I)), S the undilated 2D
covariance, against that formula from the conics in float64; its gradients by gradcheck; the
tight intersect modes, whose ellipses use the compensated opacity, still drop no contribution."""
import dataclasses
import math

import pytest
import torch

from gsexp.render import render
from gsexp.render.constants import COV2D_DILATION
from gsexp.render.reference import preprocess
from gsexp.render.reference.exhaustive import exhaustive_render64
from gsexp.render.settings import make_settings, reference_of
from render_helpers import random_scene

BACKGROUND = (0.2, 0.5, 0.9)


@pytest.mark.parametrize("dilation", [COV2D_DILATION, 0.1])  # 3DGS's and Mip-Splatting's
def test_compensation_is_the_determinant_ratio(dilation):
    """From the plain preprocess's conic C = (S + d I)^-1: S = C^-1 - d I, and the factor is
    sqrt(det S det C); computed with torch.linalg, independently of the code's closed form."""
    g, cam = random_scene(11, 400, 120, 90, 1)
    g64 = g.map(lambda t: t.double())
    plain = preprocess(g64, cam, dilation=dilation)
    aa = preprocess(g64, cam, antialiased=True, dilation=dilation)
    drawn = plain.radii > 0
    assert drawn.sum() > 200
    a, b, c = plain.conics[drawn].unbind(-1)
    conic = torch.stack([torch.stack([a, b], -1), torch.stack([b, c], -1)], -2)
    cov = torch.linalg.inv(conic) - dilation * torch.eye(2, dtype=torch.float64)
    factor = (torch.linalg.det(cov) * torch.linalg.det(conic)).clamp_min(0).sqrt()
    assert (factor < 1).all() and (factor > 0).all()
    assert factor.min() < 0.8  # small Gaussians lose much of their opacity: the test sees the factor
    # 1e-9: the conic's inversion loses a few digits for the thinnest Gaussians, float64 keeps them
    assert torch.allclose(aa.opacities[drawn], plain.opacities[drawn] * factor, rtol=1e-9, atol=0)
    assert torch.equal(aa.conics, plain.conics) and torch.equal(aa.means2d, plain.means2d)


def tiny_scene(seed: int):
    """Five Gaussians large enough to cover a few pixels each, on a 16x12 image, in float64."""
    g, cam = random_scene(seed, 5, 16, 12, 1)
    g = dataclasses.replace(g, log_scales=g.log_scales + 1.5)
    return g.map(lambda t: t.double()), cam


def test_preprocess_gradients_by_gradcheck():
    g, cam = tiny_scene(3)
    names = ("means", "log_scales", "quats", "opacity_logits")

    def opacities(*xs):
        return preprocess(dataclasses.replace(g, **dict(zip(names, xs))), cam, antialiased=True).opacities

    xs = [getattr(g, k).detach().clone().requires_grad_() for k in names]
    assert torch.autograd.gradcheck(opacities, xs, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_render_gradients_by_gradcheck():
    g, cam = tiny_scene(8)
    names = ("means", "log_scales", "opacity_logits")

    def image(*xs):
        out = render(dataclasses.replace(g, **dict(zip(names, xs))), cam, antialiased=True, background=BACKGROUND)
        return out.image, out.alpha

    xs = [getattr(g, k).detach().clone().requires_grad_() for k in names]
    assert render(g, cam, antialiased=True).alpha.max() > 0.3  # the Gaussians are on screen
    assert torch.autograd.gradcheck(image, xs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("scene", [(1, 500, 96, 72, 1)])
def test_tight_modes_with_antialiasing_equal_the_exhaustive_reference(scene):
    g, cam = random_scene(*scene)
    g = g.map(lambda t: t.clone())
    g.opacity_logits[::3] = 6.0  # opaque: their 1/255 ellipse reaches past the 3-sigma square
    g64 = g.map(lambda t: t.double())
    exhaustive, _ = exhaustive_render64(g64, cam, BACKGROUND, antialiased=True)
    plain, _ = exhaustive_render64(g64, cam, BACKGROUND)
    assert (exhaustive - plain).abs().max() > 1e-2  # the switch changes the image
    for mode in ("snugbox", "accutile"):
        out = render(g64, cam, intersect=mode, antialiased=True, background=BACKGROUND)
        assert (out.image - exhaustive).abs().max() < 1e-5, mode
        # the ellipses shrink with the opacity: fewer pairs than without the filter
        assert out.num_pairs < render(g64, cam, intersect=mode, background=BACKGROUND).num_pairs, mode


def test_tight_modes_cull_on_the_compensated_opacity():
    """o = 1.5/255 but compensated below 1/255 (sub-pixel Gaussians): no tiles in the tight modes."""
    g, cam = random_scene(1, 300, 130, 97, 1)
    g = dataclasses.replace(g, log_scales=g.log_scales - 1.0,
                            opacity_logits=torch.full_like(g.opacity_logits, math.log(1.5 / 253.5)))
    factor = preprocess(g, cam, antialiased=True).opacities / g.opacities
    faint = (factor < 0.66) & (preprocess(g, cam).radii > 0)
    assert faint.sum() > 20
    for mode in ("snugbox", "accutile"):
        assert (render(g, cam, intersect=mode).radii[faint] > 0).all(), mode
        assert (render(g, cam, intersect=mode, antialiased=True).radii[faint] == 0).all(), mode


def test_every_variant_has_the_switch():
    for name in ("torch", "vanilla", "gemm_gs", "tc_gs"):
        s = make_settings(name, antialiased=True)
        assert s.antialiased and reference_of(s).antialiased
        assert not make_settings(name).antialiased
    with pytest.raises(ValueError, match="true or false"):
        make_settings("torch", antialiased="yes")


def test_every_variant_takes_a_dilation():
    """rasterizer.dilation (3DGS's 0.3 by default; Mip-Splatting's 2D filter uses 0.1) reaches the
    reference's render: a smaller filter gives a sharper image, and bad values fail by name."""
    for name in ("torch", "vanilla", "gemm_gs", "tc_gs"):
        s = make_settings(name, dilation=0.1)
        assert s.dilation == 0.1 and reference_of(s).dilation == 0.1
        assert make_settings(name).dilation == COV2D_DILATION
    g, cam = tiny_scene(5)
    wide, sharp = (render(g, cam, make_settings("torch", dilation=d), background=BACKGROUND).image for d in (0.3, 0.1))
    assert (wide - sharp).abs().max() > 1e-3
    for bad in (0, -0.1, float("nan"), True, "0.1"):
        with pytest.raises(ValueError, match="rasterizer.dilation: must be a variance in pixels"):
            make_settings("tc_gs", dilation=bad)


def test_hit_counts_use_every_shared_switch_of_the_settings():
    """The CUDA hit counts run vanilla's blend on the settings' own preprocess and tiles: every
    switch all variants share carries over (a new one too), less the per-call outputs."""
    import dataclasses

    from gsexp.render.settings import RasterSettings, counting_settings

    s = make_settings("tc_gs", intersect="accutile", dilation=0.1, antialiased=True, depth=True, tile_order="raster",
                      timing=True)
    v = counting_settings(s)
    assert v.name == "vanilla" and (v.depth, v.timing, v.absgrad, v.backward) == (False, False, False, "exact")
    for f in dataclasses.fields(RasterSettings):
        if f.name not in ("depth", "timing", "absgrad", "backward"):
            assert getattr(v, f.name) == getattr(s, f.name), f.name
    assert counting_settings(make_settings("torch", backward="gemm_bf16")).backward == "exact"  # reference-only
