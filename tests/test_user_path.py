"""A new user's path through train.py (issue 19): extending a finished run, one-line errors
that leave nothing behind, starting from a PLY."""
import json

import pytest
import torch

from test_train_run import TINY, run_train, summaries


def test_resume_auto_with_more_iterations_extends_the_finished_run(tmp_path):
    first = run_train([*TINY, "iterations=20", "eval_every=0"], tmp_path)
    assert "starting fresh" in first.stdout + first.stderr
    again = run_train([*TINY, "iterations=30", "eval_every=0", "resume=auto"], tmp_path)
    assert "resumed from step 20" in again.stdout + again.stderr
    (name, summary), = summaries(tmp_path).items()  # one run folder: the same run, extended
    assert summary["iterations"] == 30 and summary["attempts"] == 2 and summary["status"] == "ok"
    run_dir = next(tmp_path.rglob("summary.json")).parent
    assert (run_dir / "checkpoints" / "step_000030.pt").is_file()
    log = (run_dir / "train.log").read_text()
    assert "starting fresh" in log and "resumed from step 20" in log


def test_name_picks_the_run_folder(tmp_path):
    run_train([*TINY, "iterations=5", "eval_every=0", "name=mine"], tmp_path)
    assert (tmp_path / "runs" / "mine" / "summary.json").is_file()


@pytest.mark.parametrize("args,needle", [
    (["rasterizer.blend=tcgss"], "rasterizer.blend"),          # a value typo
    (["rasterizer=vanilla"], "needs a CUDA GPU"),               # the CUDA rasterizer on a CPU machine
    (["resume=/no/such/file.pt"], "/no/such/file.pt"),
    (["model.init=ply", "model.ply=/no/such.ply"], "model.ply"),
])
def test_a_user_error_is_one_line_exit_2_and_leaves_nothing(tmp_path, args, needle):
    if args == ["rasterizer=vanilla"] and torch.cuda.is_available():
        pytest.skip("checks a machine without a GPU")
    tiny = [a for a in TINY if a != "logger=none"]  # with wandb on: no wandb run may appear either
    proc = run_train([*tiny, "iterations=5", *args], tmp_path, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert needle in out and "Traceback" not in out
    assert out.count(needle) == 1, out  # said once
    left = [p for p in tmp_path.rglob("*") if p != tmp_path / "runs"]
    assert not left, left  # no run folder, no wandb run


def test_a_key_typo_prints_no_traceback_and_leaves_no_folder(tmp_path):
    proc = run_train([*TINY, "iteraions=5"], tmp_path, check=False)
    assert proc.returncode != 0 and "iteraions" in proc.stderr and "Traceback" not in proc.stdout + proc.stderr
    assert not [p for p in tmp_path.rglob("*") if p != tmp_path / "runs"]


def test_an_existing_run_without_resume_is_a_user_error(tmp_path):
    run_train([*TINY, "iterations=5", "eval_every=0"], tmp_path)
    proc = run_train([*TINY, "iterations=5", "eval_every=0"], tmp_path, check=False)
    assert proc.returncode == 2 and "resume=auto" in proc.stderr and "Traceback" not in proc.stderr


def test_resume_from_a_ply_points_to_model_init_and_model_init_ply_trains(tmp_path):
    run_train([*TINY, "iterations=10", "eval_every=0", "name=base"], tmp_path)
    ply = tmp_path / "runs" / "base" / "point_cloud.ply"
    proc = run_train([*TINY, "iterations=5", f"resume={ply}", "name=wrong"], tmp_path, check=False)
    assert proc.returncode == 2 and "model.init=ply" in proc.stderr and "weights_only" not in proc.stderr
    run_train([*TINY, "iterations=10", "eval_every=0", "model.init=ply", f"model.ply={ply}", "name=tuned"], tmp_path)
    tuned = json.loads((tmp_path / "runs" / "tuned" / "summary.json").read_text())
    base = json.loads((tmp_path / "runs" / "base" / "summary.json").read_text())
    assert tuned["status"] == "ok" and tuned["psnr"] > base["psnr"] - 0.5  # it started from the trained model


def test_without_a_terminal_progress_lines_reach_the_output_and_train_log(tmp_path):
    proc = run_train([*TINY, "iterations=30", "eval_every=0"], tmp_path)  # stdout is a pipe
    lines = [x for x in proc.stdout.splitlines() if "it/s" in x and "ETA" in x]
    assert lines and "step 30/30 (100.0%)" in lines[-1] and "Gaussians" in lines[-1], proc.stdout
    log = next(tmp_path.rglob("train.log")).read_text()
    assert "step 30/30 (100.0%)" in log
