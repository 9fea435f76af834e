"""batch_size=k (issue 41): k training views a step, the mean of their losses, one backward and one
Adam step with gsplat's sqrt(k) learning rates; the densification statistics count every view."""
import math

import pytest
import torch
from hydra import compose, initialize_config_dir

import gsexp.train.recipe as recipe
from gsexp.config import validate
from gsexp.errors import ConfigError
from gsexp.train.params import means_lr
from gsexp.train.phases import PhaseTimer
from gsexp.train.setup import setup
from test_train_run import REPO, write_transforms_scene


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    return write_transforms_scene(tmp_path_factory.mktemp("scene"))


def config(scene_dir, *overrides):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return validate(compose("train", overrides=[
            "data=transforms", f"data.path={scene_dir}", "data.test_every=4", "logger=none", "model.num_random=300",
            "model.sh_degree=0", "iterations=1000", "appearance=affine", *overrides]))


def grads_of_steps(run, monkeypatch, orders):
    """Each step's parameter gradients (Adam held: the model stays where it started), summed over
    the steps, with the strategy's statistics and the appearance rows' gradient."""
    total = {}

    def keep_grads(run, outs):
        for name, p in run.params.items():
            total[name] = total.get(name, 0) + p.grad.clone()
            p.grad = None

    monkeypatch.setattr(recipe, "optimizer_step", keep_grads)
    run.appearance.step = lambda: None  # its gradient accumulates over the steps instead
    for order in orders:
        run.order = list(order)
        recipe.train_step(run, 1, PhaseTimer(run.device))
    return total, run.state, run.appearance.delta.grad.clone()


def test_a_batch_of_two_equals_two_single_view_steps_averaged(scene_dir, tmp_path, monkeypatch):
    a, b = 0, 4
    batch, batch_state, batch_app = grads_of_steps(setup(config(scene_dir, "batch_size=2"), tmp_path / "k2"),
                                                   monkeypatch, [[a, b]])
    single, single_state, single_app = grads_of_steps(setup(config(scene_dir), tmp_path / "k1"),
                                                      monkeypatch, [[a], [b]])
    assert batch.keys() == single.keys()
    for name in (n for n in batch if batch[n].numel()):  # shN is empty at SH degree 0
        want = single[name] / 2
        assert want.abs().max() > 0 or name == "quats", name  # isotropic at init: rotation has no gradient
        torch.testing.assert_close(batch[name], want, rtol=1e-5, atol=1e-7 * float(want.abs().max()), msg=name)
    # the per-photo transforms: each row from its own view, at half weight
    torch.testing.assert_close(batch_app, single_app / 2, rtol=1e-5, atol=1e-9)
    assert batch_app[a].abs().max() > 0 and batch_app[b].abs().max() > 0
    # densification: each view's screen gradient counted as if it trained alone, and once per view
    assert float(single_state["count"].max()) == 2
    torch.testing.assert_close(batch_state["count"], single_state["count"])
    torch.testing.assert_close(batch_state["grad2d"], single_state["grad2d"], rtol=1e-5, atol=1e-9)


def test_learning_rates_scale_with_the_batch_and_a_batch_larger_than_the_views_is_refused(scene_dir, tmp_path):
    one, four = setup(config(scene_dir), tmp_path / "k1"), setup(config(scene_dir, "batch_size=4"), tmp_path / "k4")
    for name, opt in four.optimizers.items():
        g, g1 = opt.param_groups[0], one.optimizers[name].param_groups[0]
        assert g["lr"] == pytest.approx(2 * g1["lr"]) and g["eps"] == pytest.approx(g1["eps"] / 2)
        assert g["betas"] == pytest.approx((0.9 ** 4, 0.999 ** 4))
    assert four.appearance.optimizer.param_groups[0]["lr"] == pytest.approx(2 * one.appearance.optimizer.param_groups[0]["lr"])
    recipe.train_step(four, 7, PhaseTimer(four.device))
    assert four.optimizers["means"].param_groups[0]["lr"] == pytest.approx(2 * means_lr(7, 1000, four.scene.extent))
    assert one.optimizers["sh0"].param_groups[0]["betas"] == (0.9, 0.999)  # batch_size=1: as before
    views = len(four.scene.train_cameras)
    with pytest.raises(ValueError, match=f"'batch_size': {views + 1} views a step, but the scene has {views}"):
        setup(config(scene_dir, f"batch_size={views + 1}"), tmp_path / "big")
    with pytest.raises(ConfigError, match="'batch_size': must be an integer >= 1"):
        config(scene_dir, "batch_size=0")
    assert math.isclose(four.optimizers["sh0"].param_groups[0]["lr"], 2 * 2.5e-3)


def test_a_checkpoint_resumes_only_with_its_batch_size(scene_dir, tmp_path):
    from gsexp.train.checkpoint import save_checkpoint
    from gsexp.train.setup import payload, resume_checkpoint

    run = setup(config(scene_dir, "batch_size=2"), tmp_path)
    save_checkpoint(tmp_path, 3, payload(run, 3, 1.0))
    assert resume_checkpoint(config(scene_dir, "batch_size=2", "resume=auto"), tmp_path)[1]["step"] == 3
    with pytest.raises(ValueError, match="trained with batch_size=2; resume it with batch_size=2"):
        resume_checkpoint(config(scene_dir, "resume=auto"), tmp_path)


def test_a_batch_refines_and_raises_sh_bands_per_view_as_one_view_steps(scene_dir, tmp_path, monkeypatch):
    """k views a step in 1/k the steps: as many views between refines and between SH bands as
    one-view steps (gsplat's steps_scaler). With the refine interval floored in steps, batch_size=2
    refined half as often and ended with less than half the Gaussians (gsexp.train.strategy.base)."""
    from gsexp.train.strategy import make_strategy

    for name in ("default", "budget", "mcmc", "fastgs"):
        one, two = (make_strategy(name).scaled(30_000 // k, batch_size=k) for k in (1, 2))
        assert (two.refine_start, two.refine_stop) == (one.refine_start // 2, one.refine_stop // 2), name
        assert two.refine_every * 2 == one.refine_every, name
    assert make_strategy("default").scaled(1200, batch_size=2).refine_every == 50  # the floor, per view
    # SH: a band every sh_degree_interval views
    class Rendered(Exception):
        pass

    def sh_degree_of(run, step):
        def stop(run, view, step, bg, sh_degree, timer):
            raise Rendered(sh_degree)
        monkeypatch.setattr(recipe, "view_loss_of", stop)
        with pytest.raises(Rendered) as rendered:
            recipe.train_step(run, step, PhaseTimer(run.device))
        return rendered.value.args[0]

    degrees = {}
    for k in (1, 2):
        run = setup(config(scene_dir, f"batch_size={k}", "model.sh_degree=1", "sh_degree_interval=10"),
                    tmp_path / f"k{k}")
        degrees[k] = [sh_degree_of(run, step) for step in (4, 5, 9, 10)]
    assert degrees == {1: [0, 0, 0, 1], 2: [0, 1, 1, 1]}
