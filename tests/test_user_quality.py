"""The user's path, second pass (issue 37): eval reads only its split, densification at every
resolution, CPU threads in local sweeps, the compressed PLY's SH rest."""
from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

import joblib
import numpy as np
import pytest
import torch
from PIL import Image

from gsexp import eval as gs_eval
from gsexp.gaussians import Gaussians, load_ply, make_params, save_ply, to_gaussians
from gsexp.gaussians.compressed import save_compressed_ply
from gsexp.losses import photometric_loss
from gsexp.render import render
from gsexp.scene.synthetic import ground_truth, ring_cameras
from gsexp.train.strategy import DefaultStrategy
from test_scene import write_blender
from test_strategy import no_visible_grad
from test_strategy import setup as strategy_setup
from test_train_run import TINY, run_train


# ----------------------------------------------------------------------------- eval's split

def write_colmap_text(root: Path, n: int = 9, w: int = 8, h: int = 6) -> list[str]:
    """A PINHOLE COLMAP text model of n cameras along x looking down +z, with n small PNGs."""
    sparse = root / "sparse" / "0"
    sparse.mkdir(parents=True)
    (sparse / "cameras.txt").write_text(f"1 PINHOLE {w} {h} 6 6 {w / 2} {h / 2}\n")
    names = [f"img_{i:02d}.png" for i in range(n)]
    # world-to-camera: identity rotation (qw=1), translation -x
    lines = [f"{i + 1} 1 0 0 0 {-0.1 * i} 0 4 1 {name}\n\n" for i, name in enumerate(names)]
    (sparse / "images.txt").write_text("".join(lines))
    (sparse / "points3D.txt").write_text("1 0 0 0 128 128 128 0\n2 0.2 0.1 0.3 200 100 50 0\n")
    for name in names:
        (root / "images").mkdir(exist_ok=True)
        Image.fromarray(np.full((h, w, 3), 90, np.uint8)).save(root / "images" / name)
    return names


@pytest.mark.parametrize("kind", ["colmap", "blender"])
def test_eval_of_test_views_needs_no_training_image(tmp_path, kind):
    scene = tmp_path / "scene"
    if kind == "colmap":
        names = write_colmap_text(scene)
        (scene / "images" / names[1]).unlink()  # a training view (every 8th, from 0, is test)
    else:
        write_blender(scene)
        (scene / "train" / "r_1.png").unlink()
    save_ply(ground_truth(50, seed=0), tmp_path / "m.ply")
    args = [str(tmp_path / "m.ply"), f"data={kind}", f"data.path={scene}", "rasterizer=torch",
            "lpips=false", "device=cpu"]
    assert gs_eval.main([*args, "split=test", f"out={tmp_path / 'test'}"]) == 0
    result = json.loads((tmp_path / "test" / "metrics.json").read_text())
    assert len(result["per_view"]) == 2
    assert gs_eval.main([*args, "split=train", f"out={tmp_path / 'train'}"]) == 2  # that one is needed


# ----------------------------------------------------------------------------- CPU threads

def test_jobs_of_a_local_sweep_share_the_cores(tmp_path, monkeypatch):
    """Two CPU jobs at once through hydra/launcher=gpus each get half the cores (the plugin runs
    joblib's loky backend, which sets OMP_NUM_THREADS in its workers); summary.json says so."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    run_train(["-m", "hydra/launcher=gpus", "hydra.launcher.n_jobs=2", *TINY, "iterations=2", "seed=0,1",
               "device=cpu"], tmp_path)
    summaries = [json.loads(p.read_text()) for p in tmp_path.glob("multirun/*/*/summary.json")]
    assert len(summaries) == 2
    assert [s["torch_threads"] for s in summaries] == [max(1, joblib.cpu_count() // 2)] * 2


# ----------------------------------------------------------------------------- densification

def high_gradients(state, n):
    """Statistics that put all n Gaussians over the grow threshold, rising with the index."""
    state.update(grad2d=torch.linspace(1e-3, 2e-3, n), count=torch.ones(n), max_radii=torch.zeros(n))


def refine_with_high_gradients(strategy, n=100):
    """One refine of n Gaussians, all above the grow threshold: the first half small (cloned),
    the rest large (split). Returns (params, optimizers, state)."""
    params, opts, _, _ = strategy_setup(n=n)
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.05)
        params["log_scales"][: n // 2] = math.log(0.002)
        params["opacity_logits"][:] = 2.0
    state = strategy.initial_state()
    high_gradients(state, n)
    strategy.step_post_backward(params, opts, state, 600, no_visible_grad(n), 40, 32)
    return params, opts, state


def test_densification_never_passes_the_cap_and_warns_once(caplog):
    s = DefaultStrategy(scene_extent=1.0, max_gaussians=130)
    with caplog.at_level(logging.WARNING, logger="gsexp.train"):
        params, opts, state = refine_with_high_gradients(s)
        assert len(params["means"]) == 130
        # the highest gradients (the large ones, last) go first: 30 splits of one extra each
        assert (state["n_cloned"], state["n_split"]) == (0, 30)
        for step in (700, 800):
            high_gradients(state, len(params["means"]))
            s.step_post_backward(params, opts, state, step, no_visible_grad(len(params["means"])), 40, 32)
            assert len(params["means"]) <= 130
    assert sum("max_gaussians" in r.getMessage() for r in caplog.records) == 1


def test_the_cap_defaults_to_one_gaussian_per_training_pixel():
    params, _, _ = refine_with_high_gradients(DefaultStrategy(scene_extent=1.0, training_pixels=120))
    assert len(params["means"]) == 120
    params, _, _ = refine_with_high_gradients(DefaultStrategy(scene_extent=1.0))  # unknown: 50 clones, 50 splits
    assert len(params["means"]) == 200


def densify_statistic(g, target, size: int, views: int = 4):
    """DefaultStrategy's per-Gaussian mean gradient of g against the target model's images,
    over `views` ring cameras of size x size; also the same mean in pixel units."""
    s = DefaultStrategy()
    params = make_params(g)
    state = s.initial_state()
    in_pixels = torch.zeros(len(g))
    for cam in ring_cameras(views, size, size):
        with torch.no_grad():
            ref = render(target, cam).image
        out = render(to_gaussians(params, g.sh_degree), cam)
        photometric_loss(out.image, ref, 0.2, fused=False).backward()
        in_pixels += out.means2d.grad.norm(dim=-1)
        s.step_post_backward(params, {}, state, 0, out, cam.width, cam.height)
    seen = state["count"] > 0
    return (state["grad2d"] / state["count"].clamp_min(1))[seen], (in_pixels / state["count"].clamp_min(1))[seen]


def test_the_grow_statistic_means_the_same_at_every_resolution():
    """The same model against the same scene at 32 and 128 px: the statistic (NDC units, as 3DGS
    and gsplat) agrees within 2x in the median (measured 0.6x), where a pixel-unit gradient
    differs 4x more. On 3,000 Gaussians from 32 to 256 px the medians were within 0.97-1.4x,
    so the grow threshold is not what makes small images densify faster (issue 37 item 6)."""
    target = ground_truth(400, seed=0)
    gen = torch.Generator().manual_seed(1)
    g = Gaussians(target.means + 0.01 * torch.randn(target.means.shape, generator=gen), target.log_scales,
                  target.quats, target.opacity_logits, target.sh, target.sh_degree)
    (ndc_32, px_32), (ndc_128, px_128) = densify_statistic(g, target, 32), densify_statistic(g, target, 128)
    assert 0.5 < (ndc_32.median() / ndc_128.median()).item() < 2
    assert (px_32.median() / px_128.median()).item() > 2  # what a threshold in pixels would see


# ----------------------------------------------------------------------------- compressed PLY

def with_rest_rms(g: Gaussians, rms: float, seed: int = 0) -> Gaussians:
    sh = g.sh.clone()
    sh[:, 1:] = rms * torch.randn(sh[:, 1:].shape, generator=torch.Generator().manual_seed(seed))
    return Gaussians(g.means, g.log_scales, g.quats, g.opacity_logits, sh, g.sh_degree)


def test_compressed_ply_leaves_out_sh_bands_smaller_than_its_step(tmp_path):
    """The format's SH rest step is fixed at 8/256: rest values far below it are closer to 0
    than to what 8 bits make of them, so such a band is left out; larger ones are kept."""
    g = ground_truth(300, seed=0).with_sh_degree(3)
    small, large = with_rest_rms(g, 0.003), with_rest_rms(g, 0.05)
    save_compressed_ply(small, tmp_path / "small.compressed.ply")
    save_compressed_ply(large, tmp_path / "large.compressed.ply")
    back_small = load_ply(tmp_path / "small.compressed.ply")
    assert back_small.sh_degree == 0 and load_ply(tmp_path / "large.compressed.ply").sh_degree == 3
    # left out, the rest is off by its own size; stored, it would be off by about 0.009 (step / sqrt 12)
    save_compressed_ply(small, tmp_path / "forced.compressed.ply", sh_degree=3)
    forced = load_ply(tmp_path / "forced.compressed.ply")
    order = np.argsort(save_compressed_ply(small, tmp_path / "again.compressed.ply"))
    rms = lambda back: (back.with_sh_degree(3).sh[order][:, 1:] - small.sh[:, 1:]).square().mean().sqrt()  # noqa: E731
    assert rms(back_small) < 0.004 < 0.008 < rms(forced)


def test_training_caps_the_default_strategy_at_its_pixels(tmp_path):
    from gsexp.config import validate
    from gsexp.train.setup import setup
    from test_train_config import compose_train

    tiny = [o for o in TINY if not o.startswith("strategy=")] + ["strategy=default", "device=cpu"]
    run = setup(validate(compose_train(tiny)), tmp_path)
    assert run.strategy.training_pixels == len(run.scene.train_cameras) * 32 * 32 and run.strategy.max_gaussians is None
    run = setup(validate(compose_train(tiny + ["strategy.options.max_gaussians=500"])), tmp_path)
    assert run.strategy.max_gaussians == 500


def test_a_short_run_at_kerbls_threshold_does_not_explode(tmp_path):
    """Issue 37 item 6's cause: the refine interval scaled with the run (4 steps at 1,200, 1 at
    200) left no steps between refines to lower the gradients, so every refine grew again. With the
    interval kept at 3DGS's 100, a 200-step run at Kerbl's 0.0002 refines once (at step 100): at most
    one clone or split per Gaussian. Before, it refined every step from step 3 and grew to its cap."""
    from test_train_run import run_train, summaries

    run_train(["data.options.width=32", "data.options.height=32", "data.options.num_views=8",
               "data.options.num_gaussians=300", "data.options.num_points=200", "logger=none",
               "eval_lpips=false", "iterations=200", "data.densify_grad_threshold=0.0002"], tmp_path)
    ((_, summary),) = summaries(tmp_path).items()
    assert summary["status"] == "ok" and 0 < summary["num_gaussians"] <= 2 * 200
