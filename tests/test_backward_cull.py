"""backward=exact_cull on the CPU: the switch's settings, and the float32 mirror of its skip test
(experiments/tensor_core_backward/warp_cull.py) never skipping a warp step in which some pixel's
alpha passes the backward's test, on scenes where the test is tight. The kernel itself is checked
against backward=exact on the GPU (tests/test_cuda_backward_cull.py)."""
import sys
from pathlib import Path

import pytest
import torch

from gsexp.errors import InvalidCombination
from gsexp.render import make_settings
from gsexp.render.reference.preprocess import preprocess
from gsexp.render.settings import reference_of
from render_helpers import edge_gaussians, random_scene

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "tensor_core_backward"))
import warp_cull  # noqa: E402


@pytest.mark.parametrize("name", ["vanilla", "gemm_gs", "tc_gs"])
def test_cuda_variants_take_exact_cull_and_the_reference_checks_it_as_exact(name):
    settings = make_settings(name, backward="exact_cull", absgrad=True)
    assert settings.formula["backward"] == "exact"
    ref = reference_of(settings)
    assert ref.backward == "exact" and ref.absgrad


def test_the_reference_refuses_exact_cull():
    with pytest.raises(InvalidCombination, match="exact_cull is the CUDA kernel's"):
        make_settings("torch", backward="exact_cull")


def test_absgrad_still_needs_an_exact_backward():
    with pytest.raises(InvalidCombination, match="absgrad needs backward=exact or exact_cull"):
        make_settings("tc_gs", backward="gemm_fp32", absgrad=True)


@pytest.mark.parametrize("kind", ["plain", "faint", "thin", "small"])
@pytest.mark.parametrize("intersect", ["aabb", "accutile"])
def test_the_skip_test_never_drops_a_visible_pixel(kind, intersect):
    g, cam = random_scene(7, 4000, 200, 152, 1) if kind == "plain" else edge_gaussians(7, kind)
    with torch.no_grad():
        proj = preprocess(g, cam, intersect=intersect)
        res = warp_cull.count(proj, cam.width, cam.height)
    assert res["violations"] == 0
    plain, cull = res["16x2"], res["8x4"]
    assert plain["steps"] == cull["steps"] > 0 and plain["skipped"] == 0
    assert cull["skipped"] > 0.15 * cull["steps"]  # it skips, on every kind
    assert cull["taken"] < plain["taken"]  # squarer warps meet fewer entries
    if kind == "thin":  # needles: some fall back to no skip (the determinant guard)
        _, _, guard = warp_cull.reach_box(proj.conics, proj.opacities)
        assert (guard[proj.radii > 0] == 2).sum() > 50


def test_a_skip_test_without_margins_is_caught(monkeypatch):
    """The check can fail: with the box's margins taken off, faint Gaussians get skipped where a
    pixel still passes."""
    g, cam = edge_gaussians(7, "faint")
    real = warp_cull.reach_box

    def tight(conics, opacities):
        ex, ey, kind = real(conics, opacities)
        return (ex - 0.05) / 1.01 * 0.9, (ey - 0.05) / 1.01 * 0.9, kind

    monkeypatch.setattr(warp_cull, "reach_box", tight)
    with torch.no_grad():
        res = warp_cull.count(preprocess(g, cam, intersect="accutile"), cam.width, cam.height)
    assert res["violations"] > 0


def test_the_study_script_prints_its_table(capsys, shared):
    ply = shared / "data/scenes/inria_format_9k.ply"
    assert warp_cull.main(["--ply", str(ply), "--sizes", "160x120", "--views", "1"]) == 0
    out = capsys.readouterr().out
    assert "| 160x120 #0 | 8x4 |" in out and "pixel whose alpha passes: 0" in out
