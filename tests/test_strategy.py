"""Densification strategies and the parameter surgery under them (CPU, small scenes)."""
import math
from types import SimpleNamespace

import pytest
import torch

from gsexp.render import render
from gsexp.gaussians import surgery
from gsexp.gaussians.geometry import covariance_3d
from gsexp.gaussians.params import make_params, to_gaussians
from gsexp.train.params import make_optimizers
from gsexp.train.strategy import BudgetStrategy, DefaultStrategy, MCMCStrategy, NoStrategy, Strategy, make_strategy
from render_helpers import random_scene

SH = 1


def setup(n=100, seed=0, step=True):
    """Params + Adams that have taken one real step (so Adam state exists) and the render."""
    torch.manual_seed(seed)
    g, cam = random_scene(seed, n=n, sh_degree=SH)
    params = make_params(g)
    opts = make_optimizers(params, extent=1.0)
    out = render(to_gaussians(params, SH), cam)
    (out.image - 0.5).square().mean().backward()
    if step:
        for opt in opts.values():
            opt.step()
    return params, opts, out, cam


def assert_aligned(params, opts):
    n = params["means"].shape[0]
    for name, p in params.items():
        assert p.shape[0] == n, name
        group = opts[name].param_groups[0]["params"]
        assert len(group) == 1 and group[0] is p, name
        for key, v in opts[name].state[p].items():
            if key != "step":
                assert v.shape == p.shape, (name, key)


def optimizer_step_runs(params, opts):
    before = params["means"].detach().clone()
    loss = sum(p.square().sum() for p in params.values())
    loss.backward()
    for opt in opts.values():
        opt.step()
    assert not torch.equal(before, params["means"].detach())


def no_visible_grad(n):
    """An `out` that adds nothing to the statistics, so a test can set them directly."""
    return SimpleNamespace(means2d=torch.zeros(n, 2, requires_grad=True), radii=torch.zeros(n, dtype=torch.int32))


# --- surgery ----------------------------------------------------------------------------------

def test_duplicate_copies_rows_with_fresh_adam_state():
    params, opts, _, _ = setup()
    mask = torch.zeros(100, dtype=torch.bool)
    mask[[3, 7, 50]] = True
    means, avg = params["means"].detach().clone(), opts["means"].state[params["means"]]["exp_avg"].clone()
    state = {"grad2d": torch.arange(100.0), "k": 5}
    surgery.duplicate(params, opts, mask, state)
    assert_aligned(params, opts)
    assert params["means"].shape[0] == 103 and state["grad2d"].shape == (103,) and state["k"] == 5
    assert torch.equal(params["means"][100:], means[mask])
    assert torch.equal(opts["means"].state[params["means"]]["exp_avg"][:100], avg)
    assert torch.all(opts["means"].state[params["means"]]["exp_avg"][100:] == 0)  # clones start fresh, as in 3DGS
    assert torch.equal(state["grad2d"][100:], torch.tensor([3.0, 7.0, 50.0]))
    assert params["means"].grad.shape == (103, 3) and torch.all(params["means"].grad[100:] == 0)
    optimizer_step_runs(params, opts)


def test_remove_drops_rows():
    params, opts, _, _ = setup()
    mask = torch.rand(100) < 0.3
    sq = opts["quats"].state[params["quats"]]["exp_avg_sq"].clone()
    surgery.remove(params, opts, mask)
    assert_aligned(params, opts)
    assert params["quats"].shape[0] == int((~mask).sum())
    assert torch.equal(opts["quats"].state[params["quats"]]["exp_avg_sq"], sq[~mask])
    optimizer_step_runs(params, opts)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_remove_and_split_ask_the_gpu_for_their_counts_once_each():
    """A refine's surgery edits ~30 tensors; boolean indexing would sync once per tensor, and each
    sync drains the GPU's queue (lego_turbo's refine steps took 15-29 ms of host time)."""
    import warnings

    g, _ = random_scene(0, n=1000, sh_degree=SH)
    params = {k: torch.nn.Parameter(v.detach().cuda()) for k, v in make_params(g).items()}
    opts = make_optimizers(params, extent=1.0)
    sum(p.square().sum() for p in params.values()).backward()
    for opt in opts.values():
        opt.step()
    state = {"grad2d": torch.rand(1000, device="cuda"), "count": torch.ones(1000, device="cuda")}
    for edit, expected in ((lambda m: surgery.remove(params, opts, m, state), 1),
                           (lambda m: surgery.split(params, opts, m, state=state), 2)):
        mask = torch.rand(len(params["means"]), device="cuda") < 0.3
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                edit(mask)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        syncs = [w for w in caught if "synchroniz" in str(w.message)]
        assert len(syncs) == expected, [str(w.message) for w in syncs]
    assert_aligned(params, opts)


def test_surgery_on_fresh_optimizer():
    params, opts, _, _ = setup(step=False)
    surgery.duplicate(params, opts, torch.arange(100) < 10)
    surgery.split(params, opts, torch.arange(110) < 5)
    assert params["means"].shape[0] == 115 and not opts["means"].state
    optimizer_step_runs(params, opts)
    assert_aligned(params, opts)


def test_split_children():
    params, opts, _, _ = setup()
    mask = torch.zeros(100, dtype=torch.bool)
    mask[10] = True
    orig = {k: v.detach()[10].clone() for k, v in params.items()}
    surgery.split(params, opts, mask, n=2)
    assert_aligned(params, opts)
    assert params["means"].shape[0] == 101
    assert torch.allclose(params["log_scales"][-2:].exp(), (orig["log_scales"].exp() / 1.6).expand(2, 3))
    assert torch.equal(params["sh0"][-2:], orig["sh0"].expand(2, 1, 3))
    assert torch.equal(params["opacity_logits"][-2:], orig["opacity_logits"].expand(2))
    assert torch.all(opts["means"].state[params["means"]]["exp_avg"][-2:] == 0)

    # Many children of one parent: sample mean at the parent's mean, spread = its covariance.
    big = {k: torch.nn.Parameter(v[None].repeat(20000, *([1] * v.dim()))) for k, v in orig.items()}
    surgery.split(big, {}, torch.ones(20000, dtype=torch.bool), n=2)
    offsets = big["means"].detach() - orig["means"]
    scale = orig["log_scales"].exp()
    assert offsets.mean(0).abs().max() < 0.05 * scale.max()
    cov = covariance_3d(orig["log_scales"][None], orig["quats"][None])[0]
    assert torch.allclose(offsets.T.cov(), cov, atol=0.05 * scale.max() ** 2)


def test_reset_opacity():
    params, opts, _, _ = setup()
    surgery.reset_opacity(params, opts, 0.01)
    assert torch.sigmoid(params["opacity_logits"]).max() <= 0.01 + 1e-6
    st = opts["opacity_logits"].state[params["opacity_logits"]]
    assert torch.all(st["exp_avg"] == 0) and torch.all(st["exp_avg_sq"] == 0)
    assert_aligned(params, opts)


def test_relocation_formula():
    o = torch.tensor([0.3, 0.9, 0.05, 0.99])
    for copies in (1, 2, 5, 20):
        new_o, factor = surgery.relocation_adjustment(o, torch.full((4,), copies))
        assert torch.allclose(1 - (1 - new_o) ** copies, o, atol=1e-5)  # same peak alpha
        # Same integrated alpha along a line: stack `copies` Gaussians of scale factor * s.
        x = torch.linspace(-12, 12, 4001, dtype=torch.float64)
        orig = (o[:, None].double() * torch.exp(-x**2 / 2)).sum(1)
        g = torch.exp(-x**2 / (2 * factor[:, None].double() ** 2))
        stacked = (1 - (1 - new_o[:, None].double() * g) ** copies).sum(1)
        assert torch.allclose(stacked, orig, rtol=1e-4)
        if copies == 1:
            assert torch.allclose(factor, torch.ones(4)) and torch.allclose(new_o, o)


# --- DefaultStrategy ----------------------------------------------------------------------------

def test_default_accumulates_ndc_gradient():
    params, opts, out, cam = setup(step=False)
    s = DefaultStrategy()
    state = s.initial_state()
    s.step_post_backward(params, opts, state, 1, out, cam.width, cam.height)
    vis = out.radii > 0
    expected = (out.means2d.grad * torch.tensor([cam.width / 2, cam.height / 2])).norm(dim=-1)
    assert torch.allclose(state["grad2d"][vis], expected[vis])
    assert torch.equal(state["count"], vis.float())
    assert torch.equal(state["max_radii"], out.radii.float())


def test_default_refine_clone_split_prune():
    params, opts, _, _ = setup()
    s = DefaultStrategy(scene_extent=1.0)
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.05)   # large: split when high gradient
        params["log_scales"][:10] = math.log(0.002)  # small: clone when high gradient
        params["opacity_logits"][:] = 2.0
        params["opacity_logits"][90:] = torch.logit(torch.tensor(0.001))  # pruned
    state = s.initial_state()
    state.update(grad2d=torch.zeros(n), count=torch.ones(n) * 2, max_radii=torch.full((n,), 50.0))
    state["grad2d"][:5] = 0.001    # small, high gradient: cloned
    state["grad2d"][10:14] = 0.001  # large, high gradient: split
    state["grad2d"][5:10] = 0.0003  # mean 0.00015 < threshold: untouched
    small_means = params["means"].detach()[:5].clone()
    s.step_post_backward(params, opts, state, 600, no_visible_grad(n), 40, 32)
    # 100 + 5 clones - 4 split parents + 8 children - 10 faint; radius pruning not active yet
    assert params["means"].shape[0] == 99 and (state["n_cloned"], state["n_split"], state["n_pruned"]) == (5, 4, 10)
    assert_aligned(params, opts)
    for key in ("grad2d", "count", "max_radii"):
        assert state[key].shape == (99,) and torch.all(state[key] == 0)
    means = params["means"].detach()
    assert (torch.all(means[:, None] == small_means[None], dim=2).sum(0) == 2).all()  # original + clone
    children = params["log_scales"].detach()[-8:].exp()
    assert torch.allclose(children, torch.full_like(children, 0.05 / 1.6))
    optimizer_step_runs(params, opts)


def test_budget_grows_along_its_curve_by_score_and_never_past_the_budget():
    """Each refine adds target(step) - n Gaussians, the highest gradient x opacity first (a clone
    one, a split one more); below the old threshold too; faint ones still pruned; the count never
    passes the budget, and reaches it at refine_stop."""
    s = BudgetStrategy(scene_extent=1.0, budget=130, refine_start=0, refine_stop=1000, refine_every=100)
    assert [s.target(k, 100) for k in (0, 250, 500, 1000, 5000)] == [100, 113, 122, 130, 130]
    assert BudgetStrategy(budget_multiple=2.0).target(15_000, 1000) == 2000
    params, opts, _, _ = setup()
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.05)     # split
        params["log_scales"][:50] = math.log(0.002)  # clone
        params["opacity_logits"][:] = 2.0
    state = s.initial_state()
    state.update(grad2d=torch.zeros(n), count=torch.ones(n), max_radii=torch.zeros(n))
    state["grad2d"][:] = torch.linspace(1e-6, 1e-4, n)  # all under grad_threshold (2e-4)
    with torch.no_grad():
        params["opacity_logits"][98] = -9.0  # a high gradient, but faint: a low score, then pruned
    s.step_post_backward(params, opts, state, 100, no_visible_grad(n), 40, 32)
    # target(100) = 100 + 30 * (1 - 0.81) = 106 (rounded): 99, 97, 96, 95, 94 split, 1 child each:
    # 106 - 100 = 6 room, highest scores first (99 97 96 95 94 93 -> 6 splits), then 98 pruned
    assert (state["n_cloned"], state["n_split"], state["n_pruned"]) == (0, 6, 1)
    assert params["means"].shape[0] == 105 and state["n_initial"] == 100
    assert_aligned(params, opts)
    counts = []
    for step in range(200, 1600, 100):  # every Gaussian seen, high gradients: it grows whenever room
        m = params["means"].shape[0]
        state.update(grad2d=torch.full((m,), 1e-3), count=torch.ones(m))
        s.step_post_backward(params, opts, state, step, no_visible_grad(m), 40, 32)
        counts.append(params["means"].shape[0])
        assert counts[-1] <= s.target(step, 100) <= 130
    assert counts[-1] == 130 and counts == sorted(counts)
    optimizer_step_runs(params, opts)


def test_default_prunes_big_after_first_reset_and_resets_opacity():
    params, opts, _, _ = setup()
    s = DefaultStrategy(scene_extent=1.0, prune_screen_px=20.0).scaled(3000)  # refine every 100, reset every 300
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.005)
        params["log_scales"][:3] = math.log(0.5)  # world-size prune (> 0.1 extent)
        params["opacity_logits"][:] = 2.0
    state = s.initial_state()
    state.update(grad2d=torch.zeros(n), count=torch.zeros(n), max_radii=torch.full((n,), 5.0))
    state["max_radii"][3:7] = 25.0  # screen-size prune (> 20 px)
    s.step_post_backward(params, opts, state, 600, no_visible_grad(n), 40, 32)  # refine + reset
    assert params["means"].shape[0] == 93 and state["grad2d"].shape == (93,)
    assert torch.sigmoid(params["opacity_logits"]).max() <= 0.01 + 1e-6
    assert_aligned(params, opts)


def test_default_screen_size_prune_is_off_by_default():
    params, opts, _, _ = setup()
    s = DefaultStrategy(scene_extent=1.0).scaled(3000)
    n = 100
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.005)
        params["opacity_logits"][:] = 2.0
    state = s.initial_state()
    state.update(grad2d=torch.zeros(n), count=torch.zeros(n), max_radii=torch.full((n,), 500.0))
    s.step_post_backward(params, opts, state, 600, no_visible_grad(n), 40, 32)
    assert params["means"].shape[0] == n


def test_default_white_background_resets_once_at_refine_start():
    for white, expected in ((True, 0.01), (False, 0.88)):
        params, opts, _, _ = setup()
        with torch.no_grad():
            params["opacity_logits"][:] = 2.0
        s = DefaultStrategy(scene_extent=1.0, white_background=white)
        state = s.initial_state()
        s.step_post_backward(params, opts, state, 500, no_visible_grad(100), 40, 32)
        assert torch.sigmoid(params["opacity_logits"]).max().item() == pytest.approx(expected, abs=1e-2)


def test_a_short_run_resets_opacity_as_often_as_scaled_unless_reset_every_outlasts_densification():
    """fern lost 1.5 dB to the resets a 10K run packs in (one every 1000 steps; experiments/peers/
    h100_2026-12-07_real): run.sh's fast10k_d3k_nr densifies from 500 to 3000 and never resets."""
    def opacity_after(s, steps):
        params, opts, _, _ = setup()
        with torch.no_grad():
            params["opacity_logits"][:] = 2.0
        state = s.initial_state()
        for step in steps:
            s.step_post_backward(params, opts, state, step, no_visible_grad(100), 40, 32)
        return torch.sigmoid(params["opacity_logits"]).max().item()

    plain = DefaultStrategy(scene_extent=1.0).scaled(10_000)
    assert (plain.refine_start, plain.refine_stop, plain.reset_every) == (167, 5000, 1000)
    assert opacity_after(plain, [1000]) == pytest.approx(0.01, abs=1e-3)
    kept = DefaultStrategy(scene_extent=1.0, refine_start=1500, refine_stop=9000, reset_every=30_000).scaled(10_000)
    assert (kept.refine_every, kept.refine_start, kept.refine_stop, kept.reset_every) == (100, 500, 3000, 10_000)
    assert opacity_after(kept, range(100, 10_001, 100)) == pytest.approx(0.88, abs=1e-2)


def test_default_outside_schedule_does_nothing_but_accumulate():
    params, opts, out, cam = setup()
    s = DefaultStrategy()
    state = s.initial_state()
    s.step_post_backward(params, opts, state, 450, out, cam.width, cam.height)  # before start
    assert params["means"].shape[0] == 100 and state["count"].sum() > 0
    state2 = s.initial_state()
    s.step_post_backward(params, opts, state2, 15000, out, cam.width, cam.height)  # after stop
    assert state2["grad2d"].numel() == 0


# --- MCMCStrategy -------------------------------------------------------------------------------

def test_mcmc_relocates_dead():
    params, opts, _, _ = setup()
    s = MCMCStrategy(cap_max=100)
    dead = torch.zeros(100, dtype=torch.bool)
    dead[::10] = True
    with torch.no_grad():
        params["opacity_logits"][:] = torch.logit(torch.rand(100) * 0.8 + 0.1)
        params["opacity_logits"][dead] = -10.0
    state = s.initial_state()
    s.refine(params, opts, state)
    assert params["means"].shape[0] == 100 and state["n_relocated"] == 10 and state["n_added"] == 0
    assert torch.sigmoid(params["opacity_logits"][dead]).min() >= s.min_opacity * 0.999
    # Each relocated Gaussian sits exactly on a live one (the source it copies).
    means = params["means"].detach()
    for i in dead.nonzero().squeeze(1):
        same = torch.all(means == means[i], dim=1)
        assert (same & ~dead).any()
    st = opts["means"].state[params["means"]]["exp_avg"]
    assert torch.all(st[dead] == 0)
    assert_aligned(params, opts)
    optimizer_step_runs(params, opts)


@pytest.mark.parametrize("cap, expected", [(1000, 105), (102, 102), (100, 100), (50, 100)])
def test_mcmc_growth_and_cap(cap, expected):
    params, opts, _, _ = setup()
    s = MCMCStrategy(cap_max=cap, noise_lr=0.0)
    state = s.initial_state()
    s.step_post_backward(params, opts, state, 600, None, 40, 32)
    assert params["means"].shape[0] == expected and state["n_added"] == expected - 100
    assert_aligned(params, opts)
    s.step_post_backward(params, opts, state, 650, None, 40, 32)  # not a refine step
    assert params["means"].shape[0] == expected


def test_mcmc_noise_moves_faint_gaussians():
    params, opts, _, _ = setup()
    with torch.no_grad():
        params["log_scales"][:] = math.log(0.05)
        params["opacity_logits"][:50] = torch.logit(torch.tensor(0.001))
        params["opacity_logits"][50:] = torch.logit(torch.tensor(0.9))
    before = params["means"].detach().clone()
    s = MCMCStrategy()
    s.step_post_backward(params, opts, s.initial_state(), 10, None, 40, 32, lr=1.6e-4)
    moved = (params["means"].detach() - before).norm(dim=1)
    assert moved[:50].mean() > 1e-3 and moved[50:].max() < 1e-6 * moved[:50].mean() + 1e-12
    assert params["means"].shape[0] == 100  # step 10: no refinement


# --- schedules, factory, state --------------------------------------------------------------------

def test_scaled_schedules():
    s = DefaultStrategy(scene_extent=3.0).scaled(3000)
    # the refine interval never shrinks below 3DGS's 100 steps (Strategy.scaled says why); it grows
    assert (s.refine_every, s.refine_start, s.refine_stop, s.reset_every) == (100, 50, 1500, 300)
    assert DefaultStrategy().scaled(60_000).refine_every == 200
    assert s.scene_extent == 3.0 and s.grad_threshold == 0.0002
    m = MCMCStrategy().scaled(3000)
    assert (m.refine_every, m.refine_start, m.refine_stop) == (100, 50, 2500)
    tiny = DefaultStrategy().scaled(10)
    assert tiny.refine_every >= 1 and tiny.reset_every >= 1
    assert isinstance(NoStrategy().scaled(5), NoStrategy)


def test_make_strategy():
    assert isinstance(make_strategy("default", scene_extent=2.0), DefaultStrategy)
    assert make_strategy("mcmc", cap_max=10, scene_extent=2.0).cap_max == 10
    assert isinstance(make_strategy("none", scene_extent=2.0), Strategy)
    with pytest.raises(ValueError, match="default, budget, fastgs, mcmc, none"):
        make_strategy("bogus")
    with pytest.raises(ValueError, match="no field"):
        make_strategy("mcmc", grad_threshold=1.0)


def test_no_strategy_is_inert():
    params, opts, out, cam = setup()
    s = NoStrategy()
    state = s.initial_state()
    before = params["means"]
    s.step_pre_backward(params, opts, state, 600, out)
    s.step_post_backward(params, opts, state, 600, out, cam.width, cam.height)
    assert params["means"] is before


def test_state_round_trips(tmp_path):
    params, opts, out, cam = setup()
    for s in (DefaultStrategy(), BudgetStrategy(), MCMCStrategy(), NoStrategy()):
        state = s.initial_state()
        s.step_post_backward(params, opts, state, 1, out, cam.width, cam.height, lr=1e-5)
        torch.save(state, tmp_path / "s.pt")
        loaded = torch.load(tmp_path / "s.pt", weights_only=True)
        assert loaded.keys() == state.keys()
        for k, v in state.items():
            assert torch.equal(loaded[k], v) if torch.is_tensor(v) else loaded[k] == v


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_default_statistics_on_cuda_equal_the_torch_ops():
    """The fused launch (csrc/densify.cu) accumulates what the torch ops do, over several steps."""
    from gsexp.train.strategy.default import _fused_stats

    gen = torch.Generator(device="cuda").manual_seed(3)
    n = 10_001
    fused = {k: torch.zeros(n, device="cuda") for k in ("grad2d", "count", "max_radii")}
    torch_state = {k: v.clone() for k, v in fused.items()}
    strategy = DefaultStrategy()
    for _ in range(3):
        grad = torch.randn(n, 2, generator=gen, device="cuda") * 1e-4
        radii = torch.randint(-1, 40, (n,), generator=gen, device="cuda", dtype=torch.int32)
        assert _fused_stats(grad, radii, 400.0, 300.0, fused)
        # the same step on CPU tensors takes the torch ops
        out = SimpleNamespace(means2d=SimpleNamespace(grad=grad.cpu()), radii=radii.cpu())
        torch_state = {k: v.cpu() for k, v in torch_state.items()}
        strategy._accumulate({"means": torch.zeros(n, 3)}, torch_state, out, 800, 600)
    torch_state = {k: v.cuda() for k, v in torch_state.items()}
    torch.testing.assert_close(fused["grad2d"], torch_state["grad2d"], rtol=1e-6, atol=0)
    assert torch.equal(fused["count"], torch_state["count"]) and torch.equal(fused["max_radii"], torch_state["max_radii"])
    assert fused["count"].max() == 3 and fused["count"].min() == 0
