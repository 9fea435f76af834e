"""A training step on the GPU never waits for it: no host sync between refinement steps, with
each per-view feature and a batch. A host-bound step that syncs runs its CPU and GPU work one
after the other (pose_opt's per-step camera copy once made beer's training 3.5x slower)."""
import pytest
import torch
from hydra import compose, initialize_config_dir

from gsexp.config import validate
from gsexp.train import recipe
from gsexp.train.phases import PhaseTimer
from gsexp.train.setup import setup
from test_train_run import REPO, write_transforms_scene

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    return write_transforms_scene(tmp_path_factory.mktemp("scene"))


@pytest.mark.parametrize("feature", ["", "appearance=affine", "appearance=bilateral_grid", "pose_opt=true",
                                     "batch_size=2", "rasterizer=vanilla", "strategy=mcmc", "strategy=budget",
                                     "strategy=fastgs", "sparse_adam=true", "schedule.resolution=auto",
                                     "rasterizer.antialiased=true rasterizer.absgrad=true", "model.filter_3d=true",
                                     "strategy.options.absgrad=true"])
def test_steps_between_refinements_do_not_sync(scene_dir, tmp_path, feature):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = validate(compose("train", overrides=[
            "data=transforms", f"data.path={scene_dir}", "data.test_every=4", "logger=none", "device=cuda",
            "model.num_random=3000", "iterations=1000", "pair_capacity=true",
            *feature.split(), *([] if "rasterizer=" in feature else ["rasterizer=tc_gs"]),
            "rasterizer.intersect=accutile"]))
    run = setup(cfg, tmp_path / "run")
    timer = PhaseTimer(run.device)
    assert run.strategy.refine_start > 12  # the steps below refine nothing (nor does mcmc's relocation)
    for step in range(1, 4):  # first renders size the pair buffer (one sync each, by design)
        recipe.train_step(run, step, timer)
    torch.cuda.synchronize()
    before = {k: v.detach().clone() for k, v in run.params.items()}
    torch.cuda.set_sync_debug_mode("error")  # any host sync raises
    try:
        for step in range(4, 12):
            recipe.train_step(run, step, timer)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert not torch.equal(before["means"], run.params["means"]), "the steps trained"
