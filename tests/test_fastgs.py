"""strategy=fastgs (FastGS's multi-view consistent densification and pruning) on the CPU: hit
counts under a pixel mask, the wrong-pixel map, the strategy's gate, budgeted and final pruning
with a stand-in scorer, and the trainer's scorer and a short training run on the reference."""
import json
import math

import pytest
import torch

from gsexp.gaussians.params import to_gaussians
from gsexp.losses import photometric_loss
from gsexp.render import hit_counts, render
from gsexp.render.reference.blend import blend_forward
from gsexp.render.reference.formulas import make_formula
from gsexp.render.reference.preprocess import preprocess
from gsexp.render.reference.tiles import tile_lists
from gsexp.train.params import make_optimizers
from gsexp.train.strategy import FastGSStrategy, make_strategy
from gsexp.train.view_scores import wrong_pixels
from render_helpers import random_scene
from test_strategy import assert_aligned, no_visible_grad, optimizer_step_runs
from test_strategy import setup as strategy_setup


# --- hit counts under a pixel mask ----------------------------------------------------------------

def per_pixel_hits(g, cam) -> torch.Tensor:
    """[N, H, W] bool: whether each Gaussian contributes to each pixel (the reference's entries)."""
    proj = preprocess(g, cam)
    tiles = tile_lists(proj, cam.width, cam.height)
    *_, rounds = blend_forward(proj.means2d, proj.conics, proj.opacities, proj.colors, tiles,
                               make_formula("vanilla"), cam.width, cam.height, keep_entries=True)
    hits = torch.zeros(len(g.means), cam.height, cam.width, dtype=torch.bool)
    for e in rounds:
        tile, local = e.pixel // 256, e.pixel % 256
        x = (tile % tiles.tiles_x) * 16 + local % 16
        y = (tile // tiles.tiles_x) * 16 + local // 16
        hits[tiles.gauss_ids[e.pair], y, x] = True
    return hits


def test_hit_counts_count_only_the_marked_pixels():
    g, cam = random_scene(3, n=80, width=45, height=37)  # not multiples of 16: padding pixels
    hits = per_pixel_hits(g, cam)
    mask = torch.rand(cam.height, cam.width, generator=torch.Generator().manual_seed(1)) > 0.6
    assert torch.equal(hit_counts(g, cam, pixel_mask=mask), (hits & mask).sum((1, 2)))
    assert torch.equal(hit_counts(g, cam, pixel_mask=torch.ones_like(mask)), hit_counts(g, cam))
    assert not hit_counts(g, cam, pixel_mask=torch.zeros_like(mask)).any()
    assert hit_counts(g, cam).sum() > 0
    with pytest.raises(ValueError, match="pixel_mask has shape"):
        hit_counts(g, cam, pixel_mask=mask.T)


def test_wrong_pixels_normalise_the_error_over_the_image():
    target = torch.zeros(3, 4, 5)
    image = target.clone()
    image[:, 0, 0] = 1.0   # the largest error: normalised 1
    image[:, 1, 1] = 0.15  # 0.15 of it: above 0.1
    image[:, 2, 2] = 0.05  # below
    marked = wrong_pixels(image, target, 0.1)
    assert marked.sum() == 2 and marked[0, 0] and marked[1, 1]
    mask = torch.ones(1, 4, 5)
    mask[0, 0, 0] = 0.0  # masked out: never wrong, and the range is the rest's
    marked = wrong_pixels(image, target, 0.1, mask)
    assert not marked[0, 0] and marked[1, 1] and marked[2, 2]
    assert not wrong_pixels(target, target, 0.1).any()  # no error anywhere: nothing marked


# --- the strategy, with a stand-in scorer -------------------------------------------------------------

def scorer_of(counts, weighted, calls=None):
    def scorer(k, seed):
        if calls is not None:
            calls.append((k, seed))
        return counts(), weighted()
    return scorer


def test_densify_only_where_several_views_see_errors():
    """Every Gaussian's gradient is high; only those with importance > 5 (marked pixels a view) grow."""
    params, opts, _, _ = strategy_setup()
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.05)     # split
        params["log_scales"][:50] = math.log(0.002)  # clone
        params["opacity_logits"][:] = 2.0
    counts = torch.zeros(n)
    counts[:10] = 60.0     # clones: 60 / 10 views = 6 > 5
    counts[10:20] = 50.0   # 5, not > 5: no
    counts[50:54] = 100.0  # splits
    calls = []
    s = FastGSStrategy(scene_extent=1.0, views=10, opacity_cap=1.0, prune_share=1.0,
                       view_scorer=scorer_of(lambda: counts, lambda: counts, calls))
    state = s.initial_state()
    state.update(grad2d=torch.full((n,), 1e-3), count=torch.ones(n), max_radii=torch.zeros(n))
    s.step_post_backward(params, opts, state, 600, no_visible_grad(n), 40, 32)
    assert calls == [(10, 600)]  # the step seeds the scorer's choice of views
    assert (state["n_cloned"], state["n_split"], state["n_pruned"]) == (10, 4, 0)
    assert params["means"].shape[0] == 100 + 10 + 4
    assert state["importance"].shape == (114,) and state["prune_score"].shape == (114,)
    assert_aligned(params, opts)
    optimizer_step_runs(params, opts)


def test_splits_by_the_absolute_gradient_when_asked():
    params, opts, _, _ = strategy_setup()
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.05)  # all large: splits only
        params["opacity_logits"][:] = 2.0
    everywhere = torch.full((n,), 100.0)
    s = FastGSStrategy(scene_extent=1.0, opacity_cap=1.0, prune_share=1.0, split_absgrad_threshold=0.0012,
                       view_scorer=scorer_of(lambda: everywhere, lambda: everywhere))
    assert s.wants_absgrad and not FastGSStrategy().wants_absgrad
    state = s.initial_state()
    state.update(grad2d=torch.full((n,), 1e-3), count=torch.ones(n), max_radii=torch.zeros(n),
                 grad2d_abs=torch.zeros(n))
    state["grad2d_abs"][:7] = 0.002  # only these pass 0.0012; the plain gradient would split all
    s.step_post_backward(params, opts, state, 600, no_visible_grad(n), 40, 32)
    assert state["n_split"] == 7 and params["means"].shape[0] == 107
    assert state["grad2d_abs"].shape == (107,) and not state["grad2d_abs"].any()  # restarted


def test_prune_samples_a_share_of_the_candidates_by_score():
    params, opts, _, _ = strategy_setup()
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.005)
        params["opacity_logits"][:] = 2.0
        params["opacity_logits"][:40] = -9.0  # 40 prune candidates (faint)
    weighted = torch.zeros(n)
    weighted[:20] = 1.0  # candidates 0-19 score 1 (weight 1e6), 20-39 score 0 (weight 1)
    none = torch.zeros(n)
    kept_ids = params["means"].detach().clone()

    def run(step, share):
        p = {k: torch.nn.Parameter(v.detach().clone()) for k, v in params.items()}
        o = make_optimizers(p, extent=1.0)
        s = FastGSStrategy(scene_extent=1.0, opacity_cap=1.0, prune_share=share,
                           view_scorer=scorer_of(lambda: none, lambda: weighted))
        state = s.initial_state()
        state.update(grad2d=torch.zeros(n), count=torch.ones(n), max_radii=torch.zeros(n))
        s.step_post_backward(p, o, state, step, no_visible_grad(n), 40, 32)
        gone = ~(p["means"].detach()[None] == kept_ids[:, None]).all(-1).any(1)
        return gone, state

    gone, state = run(600, 0.5)
    assert state["n_pruned"] == int(gone.sum()) <= 20 and not gone[40:].any()  # candidates only, at most half
    assert gone[:20].sum() >= 15  # the high scores first
    assert torch.equal(run(600, 0.5)[0], gone)  # the same step: the same choice (a resumed run)
    assert torch.equal(run(600, 1.0)[0], torch.arange(n) < 40)  # share 1: every candidate


def test_opacities_are_capped_after_a_refine_and_a_final_prune_follows_its_schedule():
    params, opts, _, _ = strategy_setup()
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.005)
        params["opacity_logits"][:] = 3.0       # 0.95
        params["opacity_logits"][:5] = -3.0     # 0.047 < 0.1: finally pruned
    weighted = torch.zeros(n)
    weighted[5:8] = 1.0    # score 1 > 0.9: finally pruned
    weighted[8:10] = 0.85  # kept
    s = FastGSStrategy(scene_extent=1.0, prune_share=1.0, refine_stop=1000, reset_every=10_000,
                       final_prune_start=1000, final_prune_stop=3000, final_prune_every=500,
                       view_scorer=scorer_of(lambda: torch.zeros(params["means"].shape[0]),
                                             lambda: weighted))
    state = s.initial_state()
    state.update(grad2d=torch.zeros(n), count=torch.ones(n), max_radii=torch.zeros(n))
    s.step_post_backward(params, opts, state, 600, no_visible_grad(n), 40, 32)  # a refine
    assert torch.sigmoid(params["opacity_logits"]).max() <= 0.8 + 1e-6
    assert params["means"].shape[0] == 100
    for step in (1000, 1250):  # not after refine_stop's interval yet / not on it
        s.step_post_backward(params, opts, state, step, no_visible_grad(100), 40, 32)
    assert params["means"].shape[0] == 100
    s.step_post_backward(params, opts, state, 1500, no_visible_grad(100), 40, 32)
    assert params["means"].shape[0] == 92 and state["n_final_pruned"] == 8
    assert_aligned(params, opts)


def test_without_a_scorer_it_says_who_sets_one():
    params, opts, _, _ = strategy_setup()
    s = FastGSStrategy(scene_extent=1.0)
    state = s.initial_state()
    state.update(grad2d=torch.zeros(100), count=torch.ones(100), max_radii=torch.zeros(100))
    with pytest.raises(RuntimeError, match="view_scorer"):
        s.step_post_backward(params, opts, state, 600, no_visible_grad(100), 40, 32)


def test_settings_are_checked_and_its_schedule_scales():
    s = make_strategy("fastgs").scaled(3000)
    assert (s.final_prune_start, s.final_prune_stop, s.final_prune_every) == (1500, 3000, 300)
    assert s.refine_every == 100  # 3DGS's floor for a shorter run's refine interval (Strategy.scaled)
    for bad in ({"views": 0}, {"prune_share": 0.0}, {"error_threshold": 1.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            FastGSStrategy(**bad)


# --- the trainer's scorer and a run -----------------------------------------------------------------

def compose_cfg(*overrides):
    from hydra import compose, initialize_config_dir

    from gsexp.config import validate
    from test_train_run import REPO, TINY

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return validate(compose("train", overrides=[*TINY, *overrides]))


def test_the_trainers_scorer_sums_masked_hits_over_the_sampled_views(tmp_path):
    from gsexp.train.setup import setup

    run = setup(compose_cfg("strategy=fastgs"), tmp_path)
    counts, weighted = run.strategy.view_scorer(2, 7)
    views = torch.randperm(len(run.scene.train_cameras), generator=torch.Generator().manual_seed(7))[:2].tolist()
    g = to_gaussians({k: v.detach() for k, v in run.params.items()}, run.cfg.model.sh_degree)
    want, want_weighted = torch.zeros(len(g.means)), torch.zeros(len(g.means))
    for v in views:
        cam, target = run.scene.train_cameras[v], run.images[v]
        image = render(g, cam, run.settings, background=tuple(run.scene.background)).image
        hits = hit_counts(g, cam, run.settings, pixel_mask=wrong_pixels(image, target, 0.1)).float()
        want += hits
        want_weighted += photometric_loss(image, target, run.cfg.ssim_lambda, fused=False) * hits
    assert counts.sum() > 0 and torch.equal(counts, want)
    assert torch.allclose(weighted, want_weighted)
    assert torch.equal(run.strategy.view_scorer(2, 7)[0], counts)  # the seed fixes the views


def test_a_run_densifies_by_the_scores_and_resumes_exactly(tmp_path):
    """strategy=fastgs trains (refines gated by the scores, budgeted prunes, a final prune), and a
    run killed at its step-30 checkpoint resumes to the uninterrupted run's model: the views and
    the prune sample are seeded by the step."""
    from test_train_run import TINY, kill_at_checkpoint, run_train

    args = [a for a in TINY if a != "strategy=none"] + [
        "iterations=60", "checkpoint_every=10", "eval_every=0", "strategy=fastgs",
        "strategy.options.refine_start=2500", "strategy.options.refine_every=5", "strategy.options.refine_stop=20000",
        "strategy.options.reset_every=100000", "strategy.options.views=3", "strategy.options.min_importance=0",
        "strategy.options.final_prune_start=20000", "strategy.options.final_prune_every=5000"]
    run_train(args, tmp_path / "full")
    full = torch.load(sorted((tmp_path / "full").rglob("step_000060.pt"))[0], weights_only=True)
    (summary,) = [json.loads(p.read_text()) for p in (tmp_path / "full").rglob("summary.json")]
    assert summary["num_gaussians"] != 300 and summary["psnr"] > 10
    kill_at_checkpoint(args, tmp_path / "cut", 30)
    run_train([*args, "resume=auto"], tmp_path / "cut")
    resumed = torch.load(sorted((tmp_path / "cut").rglob("step_000060.pt"))[0], weights_only=True)
    assert torch.equal(resumed["params"]["means"], full["params"]["means"])
    assert torch.equal(resumed["strategy"]["prune_score"], full["strategy"]["prune_score"])
