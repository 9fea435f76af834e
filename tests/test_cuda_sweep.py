"""A sweep on a real GPU through the pool launcher (hydra/launcher=gpus): the jobs claim their GPU
before CUDA starts, and k jobs share one device with jobs_per_gpu=k. The CPU tests fake the devices;
this is where a CUDA start before the claim shows (it failed every job of the H100's first try)."""
import json

import pytest
import torch

from gsexp.sweep.gpu_pool import visible_devices
from gsexp.sweep.results import read_csv
from test_sweep import sweep_dir_of
from test_train_run import TINY, run_train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("jobs_per_gpu", [1, 2])
def test_gpu_pool_sweep_trains_every_job(tmp_path, jobs_per_gpu):
    run_train(["-m", "hydra/launcher=gpus", f"hydra.launcher.jobs_per_gpu={jobs_per_gpu}", *TINY,
               "rasterizer=vanilla", "iterations=20", "eval_every=0", "seed=0,1,2"], tmp_path)
    sweep = sweep_dir_of(tmp_path)
    rows = read_csv(sweep / "results.csv")
    assert len(rows) == 3
    assert all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    gpus = {json.loads((sweep / r["dir"] / "summary.json").read_text())["gpu"] for r in rows}
    assert gpus <= set(visible_devices())  # each job ran on a device of the pool (the CSV reads "0" as 0.0)
