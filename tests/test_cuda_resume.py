"""A GPU run killed at a checkpoint resumes (resume=auto) to the uninterrupted run's result. The
CPU test (test_train_run) asks for the same bits; here the backward's atomics allow rounding, and
the checkpoint must hold the CUDA generators' state (read once CUDA has started)."""
import json

import pytest
import torch

from test_train_run import TINY, kill_at_checkpoint, run_train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_gpu_run_killed_at_a_checkpoint_resumes(tmp_path):
    args = [*TINY, "rasterizer=vanilla", "device=cuda", "iterations=40", "checkpoint_every=10", "eval_every=0"]
    run_train(args, tmp_path / "full")
    kill_at_checkpoint(args, tmp_path / "cut", 20)
    cut = torch.load(sorted((tmp_path / "cut").rglob("step_*.pt"))[-1], weights_only=True)
    assert cut["step"] < 40 and len(cut["rng"]["cuda"]) == torch.cuda.device_count()
    run_train([*args, "resume=auto"], tmp_path / "cut")
    full, resumed = (json.loads(next((tmp_path / d).rglob("summary.json")).read_text()) for d in ("full", "cut"))
    assert resumed["status"] == "ok" and resumed["attempts"] == 2 and resumed["iterations"] == 40
    assert resumed["psnr"] == pytest.approx(full["psnr"], abs=0.05)  # rounding from atomics, not a restart
