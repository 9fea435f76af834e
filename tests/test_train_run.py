"""train.py end to end on the tiny synthetic scene: multirun, failures, kill and resume."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
TINY = ["data.options.width=32", "data.options.height=32", "data.options.num_views=8",
        "data.options.num_gaussians=300", "data.options.num_points=200", "logger=none",
        "eval_lpips=false", "model.sh_degree=1", "strategy=none"]


def run_train(args, root: Path, check=True, **kw):
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1"}
    flags = [a for a in args if a.startswith("-")]  # Hydra wants -m before the overrides
    args = [a for a in args if not a.startswith("-")]
    proc = subprocess.run([sys.executable, "train.py", *flags, f"paths.root={root}", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def write_transforms_scene(folder: Path) -> Path:
    """A tiny instant-ngp style scene: 8 views of the synthetic ground truth at 24x24."""
    from torchvision.utils import save_image

    from gsexp.scene import load_scene

    scene = load_scene("synthetic", num_gaussians=300, num_views=8, width=24, height=24, num_points=0)
    frames = []
    (folder / "images").mkdir(parents=True)
    for i, (cam, img) in enumerate(zip(scene.train_cameras + scene.test_cameras,
                                       scene.train_images + scene.test_images)):
        save_image(img, folder / "images" / f"{i:02d}.png")
        c2w = torch.linalg.inv(cam.world_to_camera)
        c2w[:3, 1:3] *= -1  # OpenCV -> OpenGL axes
        frames.append({"file_path": f"images/{i:02d}.png", "transform_matrix": c2w.tolist()})
    cam = scene.train_cameras[0]
    (folder / "transforms.json").write_text(json.dumps(
        {"fl_x": cam.fx, "fl_y": cam.fy, "cx": cam.cx, "cy": cam.cy, "w": cam.width, "h": cam.height,
         "frames": frames}))
    return folder


def kill_at_checkpoint(args, root: Path, step: int) -> None:
    """train.py with `args`, killed (SIGKILL) once its checkpoint of `step` exists (a later one
    may be half written)."""
    env = {**os.environ, "WANDB_MODE": "offline"}
    proc = subprocess.Popen([sys.executable, "train.py", f"paths.root={root}", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not list(root.rglob(f"step_{step:06d}.pt")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def summaries(root: Path):
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.rglob("summary.json"))}


def test_tight_intersection_trains_like_aabb(tmp_path):
    """snugbox/accutile drop no contribution, so without densification (which reads which
    Gaussians are visible) a run follows the aabb run up to rounding."""
    psnr = {}
    for mode in ("aabb", "accutile"):
        run_train([*TINY, "iterations=40", "eval_every=0", "checkpoint_every=0", f"rasterizer.intersect={mode}"],
                  tmp_path / mode)
        (summary,) = summaries(tmp_path / mode).values()
        psnr[mode] = summary["psnr"]
    print(psnr)
    assert abs(psnr["aabb"] - psnr["accutile"]) < 0.05


def test_single_run_writes_the_run_dir(tmp_path):
    proc_started = time.time()
    proc = run_train([*TINY, "iterations=20", "eval_every=10", "checkpoint_every=10"], tmp_path)
    assert "test PSNR" in proc.stdout
    (run,) = summaries(tmp_path).items()
    name, summary = run
    run_dir = next(tmp_path.rglob("summary.json")).parent
    for key in ("psnr", "cc_psnr", "ssim", "lpips", "num_gaussians", "iterations", "train_seconds", "size_mb",
                "stage_ms", "overrides", "status"):
        assert key in summary, key
    assert summary["status"] == "ok" and summary["iterations"] == 20 and summary["psnr"] > 5
    assert summary["eval_views"] == len(summary["per_view"]) == 1  # 8 views, every 8th is a test view
    assert set(summary["stage_ms"]) == {"preprocess", "duplicate", "sort", "ranges", "blend"}  # as CUDA
    assert (run_dir / "point_cloud.ply").is_file() and (run_dir / "metrics.jsonl").is_file()
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt")) == ["step_000010.pt", "step_000020.pt"]
    assert list((run_dir / "renders").glob("test_*.png"))
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("train/loss" in x for x in lines) and any("eval/psnr" in x for x in lines)
    phases = ("render", "loss", "backward", "densify", "optimizer")
    logged = [x for x in lines if "train/loss" in x]
    assert all(f"train/phase_ms/{p}" in x for x in logged for p in phases)  # a CPU run reads them at once
    elapsed = [x["train/elapsed_s"] for x in logged]  # the training clock at each log step
    assert elapsed == sorted(elapsed) and 0 < elapsed[-1] <= summary["train_seconds"]
    evals = {x["step"]: x["eval/train_seconds"] for x in lines if "eval/psnr" in x}  # quality against time
    assert sorted(evals) == [10, 20] and 0 < evals[10] < evals[20] == summary["train_seconds"]
    assert set(summary["phase_ms"]) == set(phases) and all(v >= 0 for v in summary["phase_ms"].values())
    assert summary["phase_ms"]["render"] > 0 and summary["phase_ms"]["backward"] > 0
    assert set(summary["phase_ms_mean"]) == set(phases) and summary["phase_ms_mean"]["backward"] > 0
    assert all(x["train/host_ms"] > 0 for x in logged) and summary["host_ms"]["median"] > 0  # the host's issue time
    # per-job overhead from the process's start (imports count) to the first step, and after the last
    over = summary["overhead_s"]
    assert 0.5 < over["to_first_step"] < time.time() - proc_started and 0 < over["after_last_step"] < 120
    parts = over["imports"] + over["load_inputs"] + over["setup"]  # the start-up's parts add up to it
    assert min(over["imports"], over["load_inputs"], over["setup"]) >= 0
    assert parts == pytest.approx(over["to_first_step"], abs=1e-3)
    assert 0 < over["evaluation"] <= over["after_last_step"]
    assert over["slow_imports"] == []  # recorded, so a GPU run shows whether anything loads them there
    # the evaluation and checkpoint at step 10 are off the training clock, and timed on their own
    paused = summary["paused_s"]
    assert paused["evaluation"] > 0 and paused["checkpoints"] > 0
    assert summary["train_seconds"] + sum(paused.values()) < time.time() - proc_started
    setup_parts = over["setup_parts"]  # inside setup: the model, images, the rest, resume (a GPU adds its two)
    assert {"model", "images", "rest", "resume"} <= set(setup_parts) and min(setup_parts.values()) >= 0
    assert sum(setup_parts.values()) <= over["setup"] + 1e-3


def test_multirun_two_values_and_a_failing_job(tmp_path):
    # three jobs: two train, one points at a missing scene and must fail without stopping the others
    run_train(["-m", *TINY, "iterations=10", "seed=1,2"], tmp_path / "ok")
    got = summaries(tmp_path / "ok")
    assert len(got) == 2 and all(s["status"] == "ok" for s in got.values())
    assert all(0 < s["overhead_s"]["to_first_step"] < 120 for s in got.values())  # from each job's own start
    scene = write_transforms_scene(tmp_path / "scene")
    run_train(["-m", "data=transforms", f"data.path={scene},/no/such/scene", "logger=none", "eval_lpips=false",
               "strategy=none", "iterations=10", "model.num_random=300", "model.sh_degree=0"], tmp_path / "mixed")
    got = list(summaries(tmp_path / "mixed").values())
    assert sorted(s["status"] for s in got) == ["failed", "ok"]
    failed = next(s for s in got if s["status"] == "failed")
    assert "data.path" in failed["error"] and "/no/such/scene" in failed["error"]


@pytest.mark.parametrize("args,needle", [
    (["iterations=-3"], "iterations"),
    (["data=blender", "data.path=/no/such/scene"], "/no/such/scene"),
    (["rasterizer.blend=fast"], "rasterizer.blend"),
    (["rasterizer.intersect=obb"], "rasterizer.intersect"),
    (["compress=vq", "compress.options.vq_step=24000"], "compress.options.vq_step"),  # SH band 1 starts after it
    (["iteraions=5"], "iteraions"),
])
def test_bad_config_fails_fast(tmp_path, args, needle):
    proc = run_train([*args, "logger=none"], tmp_path, check=False)
    assert proc.returncode != 0
    assert needle in proc.stdout + proc.stderr and "Traceback" not in proc.stdout + proc.stderr
    # Before any training: no step logged, no checkpoint.
    assert not list(tmp_path.rglob("metrics.jsonl")) and not list(tmp_path.rglob("*.pt"))


def test_kill_and_resume_matches_an_uninterrupted_run(tmp_path):
    # Kerbl's densification, in 30k-step units scaled to 60 steps: from 12 to 55, every 5 steps (an
    # interval scales up but never below its value: Strategy.scaled; 5 steps is enough for this test)
    args = [*TINY, "iterations=60", "checkpoint_every=10", "eval_every=0", "strategy=default",
            "strategy.options.refine_start=6000", "strategy.options.refine_every=5",
            "strategy.options.refine_stop=27500", "strategy.options.reset_every=30000"]
    full = run_train(args, tmp_path / "full")
    full_ckpt = torch.load(sorted((tmp_path / "full").rglob("step_000060.pt"))[0], weights_only=True)

    kill_at_checkpoint(args, tmp_path / "cut", 30)
    ckpts = sorted((tmp_path / "cut").rglob("step_*.pt"))
    assert ckpts, "no checkpoint before the kill"
    for c in ckpts:  # every file under a final name is complete
        torch.load(c, weights_only=True)
    cut_ckpt = torch.load(ckpts[-1], weights_only=True)
    at_cut = len(cut_ckpt["params"]["means"])

    run_train([*args, "resume=auto"], tmp_path / "cut")
    resumed = torch.load(sorted((tmp_path / "cut").rglob("step_000060.pt"))[0], weights_only=True)
    assert resumed["step"] == 60
    assert len(resumed["params"]["means"]) != at_cut  # densification ran after the cut
    assert len(resumed["params"]["means"]) == len(full_ckpt["params"]["means"])
    assert torch.equal(resumed["params"]["means"], full_ckpt["params"]["means"])
    assert full.returncode == 0
    # The summary and metrics describe the run, not its last attempt.
    (summary,) = summaries(tmp_path / "cut").values()
    assert summary["status"] == "ok" and summary["error"] is None and summary["attempts"] == 2
    assert summary["train_seconds"] >= cut_ckpt["train_seconds"] > 0
    rows = [json.loads(x) for x in next((tmp_path / "cut").rglob("metrics.jsonl")).read_text().splitlines()]
    steps = [r["step"] for r in rows if "train/loss" in r]
    assert len(steps) == len(set(steps)) == len([r for r in full_rows(tmp_path / "full") if "train/loss" in r])


def full_rows(root: Path) -> list[dict]:
    return [json.loads(x) for x in next(root.rglob("metrics.jsonl")).read_text().splitlines()]


def test_rerun_without_resume_keeps_the_earlier_run(tmp_path):
    run_train([*TINY, "iterations=10"], tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix in (".pt", ".ply")}
    proc = run_train([*TINY, "iterations=10"], tmp_path, check=False)
    assert proc.returncode != 0 and "resume=auto" in proc.stderr + proc.stdout
    assert all(p.read_bytes() == b for p, b in before.items())
    assert json.loads(next(tmp_path.rglob("summary.json")).read_text())["status"] == "ok"


def test_periodic_evaluation_and_checkpoints_are_off_the_training_clock(tmp_path, monkeypatch):
    """train_seconds counts the steps: a periodic evaluation and a checkpoint that take 2 s more
    each (slowed here) add to paused_s, not to it."""
    from gsexp.config import validate
    from gsexp.track import Logger
    from gsexp.train import recipe
    from test_train_config import compose_train

    slow = {"evaluate": recipe.evaluate, "save_checkpoint": recipe.save_checkpoint}

    def slowed(name):
        def call(*args, **kwargs):
            time.sleep(2.0)
            return slow[name](*args, **kwargs)
        return call

    cfg = validate(compose_train(TINY + ["iterations=12", "eval_every=6", "checkpoint_every=6"]))
    fast = recipe.train(cfg, tmp_path / "fast", Logger(), [])
    for name in slow:
        monkeypatch.setattr(recipe, name, slowed(name))
    slowed_run = recipe.train(cfg, tmp_path / "slow", Logger(), [])
    # one evaluation and one checkpoint in the loop (step 6), each with a 2 s sleep inside the
    # paused window; the final ones (step 12) were never on the clock. (Not "fast's + 1.9": the
    # first evaluation of a process, fast's, pays a warm-up the second does not, up to 0.1 s here.)
    assert slowed_run["paused_s"]["evaluation"] >= 2.0 and slowed_run["paused_s"]["checkpoints"] >= 2.0
    assert slowed_run["train_seconds"] < fast["train_seconds"] + 2.0  # on the clock they would add 4


def test_a_training_imports_neither_dynamo_nor_torchvision(tmp_path, shared):  # shared: LPIPS's weights
    """torch._dynamo (with torchvision, torchmetrics and the lpips package, which import it) took
    over a second at each job's start and another at its evaluation (issue 39): a training with
    densification, checkpoints and an LPIPS evaluation must load none of them (summary.json's
    overhead_s.slow_imports lists those loaded by the end)."""
    args = [a for a in TINY if a not in ("eval_lpips=false", "strategy=none")]
    run_train([*args, "eval_lpips=true", "iterations=30", "eval_every=20", "checkpoint_every=20"], tmp_path)
    (summary,) = summaries(tmp_path).values()
    assert summary["status"] == "ok" and summary["lpips"] is not None  # the evaluation ran LPIPS
    assert summary["overhead_s"]["slow_imports"] == []


def test_periodic_evaluations_and_checkpoints_leave_the_training_alone(tmp_path, shared):  # shared: LPIPS
    """What a run trains does not depend on eval_every or checkpoint_every: evaluating (LPIPS's
    network included) and saving draw nothing from the RNG that picks the next views. Before,
    building LPIPS's network initialised it at random first, so each run's model changed after
    its first evaluation."""
    args = [a for a in TINY if a not in ("eval_lpips=false", "strategy=none")] + ["eval_lpips=true", "iterations=40"]
    run_train([*args, "eval_every=0", "checkpoint_every=0"], tmp_path / "plain")
    run_train([*args, "eval_every=10", "checkpoint_every=15"], tmp_path / "paused")
    plain, paused = (next((tmp_path / k).rglob("point_cloud.ply")).read_bytes() for k in ("plain", "paused"))
    assert plain == paused
