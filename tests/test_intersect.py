"""Tight tile intersection (rasterizer.intersect) on the torch reference: snugbox and accutile
drop no contribution, against an exhaustive reference that tests every Gaussian against every
pixel; aabb (3-sigma squares) can cut faint tails, and these tests see it."""
import math

import pytest
import torch

from gsexp.metrics import psnr
from gsexp.render import render
from gsexp.render.reference import preprocess
from gsexp.render.reference.exhaustive import exhaustive_render64
from gsexp.render.reference.tiles import duplicate
from render_helpers import dense_render64, random_scene

BACKGROUND = (0.2, 0.5, 0.9)
SCENES = [  # seed, Gaussians, width, height, SH degree
    (0, 60, 40, 32, 2),
    (1, 800, 130, 97, 3),
    (4, 2000, 171, 120, 1),
]


def opaque(g):
    """A third of the Gaussians near-opaque: their 1/255 level lies at 3.33 sigma, past the
    3-sigma square."""
    g = g.map(lambda t: t.clone())
    g.opacity_logits[::3] = 6.0
    return g


def needles(g):
    """Every other Gaussian a long thin needle: the conic's determinant cancels, which a
    float32 box computation gets wrong by far more than the margins."""
    g = g.map(lambda t: t.clone())
    g.log_scales[::2, 0] += 5.0
    g.log_scales[::2, 1:] -= 4.0
    return g


@pytest.mark.parametrize("scene", SCENES + [("needles", 4, 1500, 171, 120, 1)])
def test_tight_modes_equal_the_exhaustive_reference(scene):
    if scene[0] == "needles":
        g, cam = random_scene(*scene[1:])
        g = needles(g)
    else:
        g, cam = random_scene(*scene)
    g64 = opaque(g).map(lambda t: t.double())
    exhaustive, _ = exhaustive_render64(g64, cam, BACKGROUND)
    out = {mode: render(g64, cam, intersect=mode, background=BACKGROUND) for mode in ("aabb", "snugbox", "accutile")}
    err = {mode: (o.image - exhaustive).abs().max().item() for mode, o in out.items()}
    print(scene, err, {mode: o.num_pairs for mode, o in out.items()})
    assert err["snugbox"] < 1e-5 and err["accutile"] < 1e-5
    assert torch.allclose(out["snugbox"].image, out["accutile"].image, rtol=0, atol=1e-12)
    assert out["accutile"].num_pairs <= out["snugbox"].num_pairs
    if scene[0] != 0:  # enough opaque Gaussians that some tail crosses out of its square
        assert err["aabb"] > 1e-4


@pytest.mark.parametrize("settings", [{"blend": "gemm", "precision": "fp32"}, {"blend": "tcgs", "precision": "fp32"},
                                      {"blend": "gemm", "precision": "fp16"}, {"blend": "tcgs", "precision": "fp16"}])
def test_every_blend_reads_the_tight_lists(settings):
    """The matrix blends on snugbox and accutile lists: the same image in fp32; in fp16 an
    entry of snugbox's extra tiles may pass by rounding, within the variants' 60 dB."""
    g, cam = random_scene(*SCENES[1])
    g = opaque(g)
    with torch.no_grad():
        snug, accu = (render(g, cam, intersect=m, background=BACKGROUND, **settings).image for m in ("snugbox", "accutile"))
    if settings["precision"] == "fp32":
        assert torch.allclose(snug, accu, rtol=0, atol=1e-6)
    else:
        assert psnr(snug, accu) >= 60


def test_the_exhaustive_reference_in_chunks_equals_the_loop():
    g, cam = random_scene(*SCENES[1])
    loop, loop_margin = dense_render64(opaque(g).map(lambda t: t.double()), cam, BACKGROUND, tiles=False)
    chunked, margin = exhaustive_render64(opaque(g), cam, BACKGROUND, chunk=37)
    assert (loop - chunked).abs().max() < 1e-12
    assert torch.allclose(loop_margin, margin, rtol=1e-9, atol=1e-12)


def pairs_by_gaussian(proj):
    ids, xy = duplicate(proj)
    out = {}
    for i, (x, y) in zip(ids.tolist(), xy.tolist()):
        out.setdefault(i, set()).add((x, y))
    return out


def reaching_tiles(proj, i, width, height):
    """Tiles where some pixel centre of the image gets alpha >= 1/255 from Gaussian i (float64)."""
    ys, xs = torch.meshgrid(torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64),
                            indexing="ij")
    a, b, c = proj.conics[i].double()
    dx, dy = proj.means2d[i, 0].double() - xs, proj.means2d[i, 1].double() - ys
    power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
    hit = (power <= 0) & (proj.opacities[i].double() * torch.exp(power) >= 1 / 255)
    return {(x // 16, y // 16) for y, x in torch.nonzero(hit).tolist()}


def test_accutile_keeps_every_reaching_tile_and_few_others():
    """Per Gaussian: every tile a pixel of which reaches 1/255 is kept (lossless); accutile's
    tiles are a subset of snugbox's, which is the box around them."""
    g, cam = random_scene(*SCENES[1])
    g = opaque(g)
    with torch.no_grad():
        snug = preprocess(g, cam, intersect="snugbox")
        accu = preprocess(g, cam, intersect="accutile")
    snug_tiles, accu_tiles = pairs_by_gaussian(snug), pairs_by_gaussian(accu)
    extra = 0
    for i in range(len(g.means)):
        reach = reaching_tiles(accu, i, cam.width, cam.height)
        mine = accu_tiles.get(i, set())
        assert reach <= mine, (i, reach - mine)
        assert mine <= snug_tiles.get(i, set())
        extra += len(mine - reach)
    total = sum(len(t) for t in accu_tiles.values())
    print(f"accutile: {total} pairs, {extra} with no pixel reaching 1/255")
    assert extra <= 0.2 * total  # spans are tight up to the band: a few corner tiles, not whole rows


def test_tight_modes_cull_gaussians_that_cannot_reach_one_255th():
    g, cam = random_scene(*SCENES[1])
    g = g.map(lambda t: t.clone())
    faint = torch.zeros(len(g.means), dtype=torch.bool)
    faint[::5] = True
    g.opacity_logits[faint] = math.log(0.9 / 255 / (1 - 0.9 / 255))  # o = 0.9 / 255
    for mode in ("snugbox", "accutile"):
        out = render(g, cam, intersect=mode)
        assert (out.radii[faint] == 0).all(), mode
    assert (render(g, cam, intersect="aabb").radii[faint] > 0).any()  # vanilla keeps them (no effect on the image)


def test_gradients_through_tight_lists_equal_the_exhaustive_ones():
    g, cam = random_scene(*SCENES[1])
    g64 = opaque(g).map(lambda t: t.double())
    w = torch.rand(3, cam.height, cam.width, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    grads = []
    for run in ("accutile", "exhaustive"):
        leaves = g64.map(lambda t: t.detach().clone().requires_grad_())
        if run == "exhaustive":
            image = dense_render64(leaves, cam, BACKGROUND, tiles=False)[0]
        else:
            image = render(leaves, cam, intersect=run, background=BACKGROUND).image
        (image * w).sum().backward()
        grads.append([leaves.means.grad, leaves.log_scales.grad, leaves.opacity_logits.grad, leaves.sh.grad])
    for a, b in zip(*grads):
        assert (a - b).norm() <= 1e-6 * b.norm(), ((a - b).norm() / b.norm()).item()  # measured 1.4e-8


def test_unknown_intersect_is_rejected():
    g, cam = random_scene(*SCENES[0])
    with pytest.raises(ValueError, match="intersect: .obb. is not one of"):
        render(g, cam, intersect="obb")


def test_the_cuda_routines_agree_with_the_reference(tmp_path):
    """csrc/intersect.cuh built for the host (tests/intersect_host.cpp: the _rn intrinsics are
    IEEE float ops there too) gives the reference's boxes and tile sets on random ellipses."""
    import shutil
    import subprocess
    from pathlib import Path

    from gsexp.render.reference import intersect as tight

    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    repo = Path(__file__).resolve().parents[1]
    exe = tmp_path / "intersect_host"
    subprocess.run(["g++", "-std=c++17", "-O2", "-ffp-contract=off", "-I", str(repo / "csrc"),
                    str(repo / "tests" / "intersect_host.cpp"), "-o", str(exe)], check=True)
    gen = torch.Generator().manual_seed(7)
    n, width, height = 3000, 301, 187
    means2d = torch.rand(n, 2, generator=gen) * torch.tensor([width + 80.0, height + 80.0]) - 40
    sigma = torch.exp(torch.rand(n, 2, generator=gen) * 4 - 0.5)  # 0.6 .. 33 px
    sigma[::4, 0] *= 60  # needles: the conic's determinant cancels
    angle = torch.rand(n, generator=gen) * math.pi
    rot = torch.stack([torch.cos(angle), -torch.sin(angle), torch.sin(angle), torch.cos(angle)], -1).view(n, 2, 2)
    cov = rot @ torch.diag_embed(sigma ** 2) @ rot.transpose(1, 2)
    inv = torch.linalg.inv(cov)
    conics = torch.stack([inv[:, 0, 0], inv[:, 0, 1], inv[:, 1, 1]], -1).float()
    opacities = torch.rand(n, generator=gen).float() * 1.01  # some above 1 (clamped by nothing), some < 1/255
    opacities[::7] = torch.rand(len(opacities[::7]), generator=gen) * 0.006
    lines = [f"{m[0]:.9g} {m[1]:.9g} {c[0]:.9g} {c[1]:.9g} {c[2]:.9g} {o:.9g} {width} {height} {mode}"
             for mode in (1, 2) for m, c, o in zip(means2d.tolist(), conics.tolist(), opacities.tolist())]
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    rows = [line.split() for line in out.stdout.splitlines()]
    snug_rows, accu_rows = rows[:n], rows[n:]

    sxx, sxy, syy, level, ok = tight.ellipse(conics, opacities)
    rect_min, rect_max, ok_rect = tight.snug_rect(means2d, sxx, syy, level, width, height)
    ok = ok & ok_rect
    rect_max = torch.where(ok[:, None], rect_max, rect_min)
    ids, xy, counts = tight.accutile(means2d, sxx, sxy, syy, level, rect_min, rect_max, width, height)
    ref_tiles = [set() for _ in range(n)]
    for i, (x, y) in zip(ids.tolist(), xy.tolist()):
        ref_tiles[i].add((x, y))
    box_off = tiles_off = 0
    for i in range(n):
        count, *box = map(int, snug_rows[i][:5])
        ref_box = [*rect_min[i].tolist(), *rect_max[i].tolist()] if ok[i] else [0, 0, 0, 0]
        box_off += (count > 0) != bool(ok[i]) or (count > 0 and box != ref_box)
        accu = {tuple(map(int, t.split(","))) for t in accu_rows[i][5:]}
        tiles_off += accu != ref_tiles[i] or int(accu_rows[i][0]) != len(accu)
    print(f"boxes differing: {box_off} of {n}; accutile sets differing: {tiles_off}; pairs {len(ids)}")
    assert int(ok.sum()) > n // 2 and len(ids) > n
    assert box_off <= n // 500 and tiles_off <= n // 500  # log vs logf may move a rare edge
