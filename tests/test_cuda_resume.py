"""A GPU run killed at a checkpoint resumes (resume=auto) to the uninterrupted run's result. The
CPU test (test_train_run) asks for the same bits; here the backward's atomics allow rounding, and
the checkpoint must hold the CUDA generators' state (read once CUDA has started)."""
import json

import pytest
import torch

from test_train_run import TINY, kill_at_checkpoint, run_train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_gpu_run_killed_at_a_checkpoint_resumes(tmp_path):
    # Long enough that the kill lands mid-run: a GPU trains this tiny scene at a few ms a step, and
    # the kill follows the step-500 checkpoint by up to ~0.1 s.
    args = [*TINY, "rasterizer=vanilla", "device=cuda", "iterations=2000", "checkpoint_every=500", "eval_every=0"]
    run_train(args, tmp_path / "full")
    kill_at_checkpoint(args, tmp_path / "cut", 500)
    cut = torch.load(sorted((tmp_path / "cut").rglob("step_*.pt"))[-1], weights_only=True)
    assert cut["step"] < 2000 and len(cut["rng"]["cuda"]) == torch.cuda.device_count()
    assert not list((tmp_path / "cut").rglob("summary.json")), "the kill came after the run had finished"
    run_train([*args, "resume=auto"], tmp_path / "cut")
    full, resumed = (json.loads(next((tmp_path / d).rglob("summary.json")).read_text()) for d in ("full", "cut"))
    assert resumed["status"] == "ok" and resumed["attempts"] == 2 and resumed["iterations"] == 2000
    assert resumed["psnr"] == pytest.approx(full["psnr"], abs=0.05)  # rounding from atomics, not a restart
