"""The user's path, second pass (issue 37): eval reads only its split, densification at every
resolution, CPU threads in local sweeps, the compressed PLY's SH rest."""
from __future__ import annotations

import json
import os
from pathlib import Path

import joblib
import numpy as np
import pytest
from PIL import Image

from gsexp import eval as gs_eval
from gsexp.gaussians import save_ply
from gsexp.scene.synthetic import ground_truth
from test_scene import write_blender
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
