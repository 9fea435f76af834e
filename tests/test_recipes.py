"""Training recipes that cut work (issue 40): the resolution schedule (schedule.resolution) and
the budget strategy (strategy=budget) on the CPU: levels, camera scaling, the budget never
exceeded, resuming mid-schedule exactly."""
import json
import math

import pytest
import torch
from hydra import compose, initialize_config_dir

from gsexp.config import validate
from gsexp.errors import ConfigError
from gsexp.scene import Camera
from gsexp.train.resolution import amplitude_share, auto_schedule, manual_schedule
from test_train_run import REPO, TINY, kill_at_checkpoint, run_train


def camera(w=64, h=48):
    return Camera(torch.eye(4), 60.0, 60.0, w / 2, h / 2, w, h)


def test_manual_levels_scale_with_iterations_and_views_shrink_camera_and_target():
    s = manual_schedule([4, 2, 1], [0, 3000, 9000], iterations=3000)  # 30k-run steps scaled by 1/10
    assert s.starts == (0, 300, 900) and [s.downscale(k) for k in (0, 299, 300, 899, 900, 2999)] == [4, 4, 2, 2, 1, 1]
    img = torch.rand(3, 48, 64)
    cam, target = s.view(camera(), img, 10)
    assert (cam.width, cam.height, cam.fx, cam.cx) == (16, 12, 15.0, 8.0) and target.shape == (3, 12, 16)
    assert torch.allclose(target, img.reshape(3, 12, 4, 16, 4).mean((2, 4)), atol=1e-6)  # area average
    full = camera()
    cam, target = s.view(full, img, 900)
    assert cam is full and target is img
    assert manual_schedule([4, 2, 1], [0, 0, 10], 30_000).starts == (0, 10)  # a level of no steps is dropped


def test_auto_levels_follow_the_images_spectra():
    """White noise has a flat spectrum: an image 1/d the size holds 1/d^2 of it. A smooth image
    holds all its detail at the coarsest level, so it trains there until full_at."""
    gen = torch.Generator().manual_seed(0)
    noise = [torch.rand(3, 64, 64, generator=gen) for _ in range(4)]
    shares = amplitude_share(noise, [4, 2, 1])
    assert shares[2] == pytest.approx(1.0) and shares[1] == pytest.approx(0.25, abs=0.03)
    assert shares[0] == pytest.approx(1 / 16, abs=0.02)
    s = auto_schedule(noise, 1000, max_downscale=4, full_at=0.5)
    assert s.downscales == (4, 2.828, 2, 1.414, 1) and s.starts[0] == 0 and s.starts[-1] <= 500
    assert list(s.starts) == sorted(s.starts) and s.starts[2] == pytest.approx(500 * 0.125, abs=15)
    y, x = torch.meshgrid(torch.linspace(0, 1, 64), torch.linspace(0, 1, 64), indexing="ij")
    smooth = [torch.stack([torch.sin(math.pi * x) * torch.sin(math.pi * y)] * 3)]
    assert auto_schedule(smooth, 1000, 4, 0.5).downscales[0] == 4
    assert auto_schedule(smooth, 1000, 4, 0.5).starts[1] >= 450


@pytest.fixture(scope="module")
def compose_cfg():
    def make(*overrides):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            return validate(compose("train", overrides=[*TINY, *overrides]))
    return make


@pytest.mark.parametrize("overrides, message", [
    (["schedule.resolution=fast"], "'fast' is not one of none, auto, manual"),
    (["schedule.resolution=manual"], "manual needs downscales and steps of one length"),
    (["schedule.resolution=manual", "schedule.downscales=[4,2]", "schedule.steps=[0,100]"], "end at 1"),
    (["schedule.resolution=manual", "schedule.downscales=[2,1]", "schedule.steps=[10,100]"], "must start at 0"),
    (["schedule.resolution=auto", "schedule.full_at=0"], "schedule.full_at"),
])
def test_bad_schedules_are_one_clear_error(compose_cfg, overrides, message):
    with pytest.raises(ConfigError, match=message):
        compose_cfg(*overrides)


def test_a_step_trains_at_the_levels_size(compose_cfg, tmp_path):
    from gsexp.train.phases import PhaseTimer
    from gsexp.train.recipe import train_step
    from gsexp.train.setup import setup

    cfg = compose_cfg("schedule.resolution=manual", "schedule.downscales=[4,1]", "schedule.steps=[0,15000]",
                      "iterations=100")
    run = setup(cfg, tmp_path)
    sizes = []
    for step in (0, 49, 50):
        out, _, target = train_step(run, step, PhaseTimer(run.device))
        sizes.append((tuple(out.image.shape), tuple(target.shape)))
    assert sizes == [((3, 8, 8), (3, 8, 8))] * 2 + [((3, 32, 32), (3, 32, 32))]


def test_budget_and_schedule_train_and_resume_exactly(tmp_path):
    """strategy=budget with schedule.resolution=manual, two views a step as lego_turbo (and
    appearance=affine, pose_opt, issue 41): the count never passes the budget, and a run killed at
    its step-15 checkpoint resumes (mid-schedule) to the uninterrupted run's model and colour
    transforms."""
    args = [a for a in TINY if a != "strategy=none"] + [
        "iterations=30", "batch_size=2", "checkpoint_every=5", "eval_every=0", "strategy=budget",
        "strategy.options.budget=330", "strategy.options.refine_start=3000", "strategy.options.refine_every=5",
        "strategy.options.refine_stop=27500", "schedule.resolution=manual", "schedule.downscales=[4,2,1]",
        "schedule.steps=[0,10000,20000]", "appearance=affine", "pose_opt=true"]
    run_train(args, tmp_path / "full")
    full = torch.load(sorted((tmp_path / "full").rglob("step_000030.pt"))[0], weights_only=True)
    (summary,) = [json.loads(p.read_text()) for p in (tmp_path / "full").rglob("summary.json")]
    assert 200 < summary["num_gaussians"] <= 330 and summary["appearance_mean_change"] > 0
    log = next((tmp_path / "full").rglob("train.log")).read_text()
    assert "schedule.resolution=manual: 1/4 from step 0, 1/2 from step 10, 1/1 from step 20" in log

    kill_at_checkpoint(args, tmp_path / "cut", 15)
    run_train([*args, "resume=auto"], tmp_path / "cut")
    resumed = torch.load(sorted((tmp_path / "cut").rglob("step_000030.pt"))[0], weights_only=True)
    assert torch.equal(resumed["params"]["means"], full["params"]["means"])
    assert torch.equal(resumed["appearance"]["delta"], full["appearance"]["delta"])
    assert torch.equal(resumed["pose"]["delta"], full["pose"]["delta"]) and full["pose"]["delta"].abs().max() > 0
    assert resumed["strategy"]["n_initial"] == full["strategy"]["n_initial"] == 200


def test_the_budget_grows_with_the_training_resolution(compose_cfg, tmp_path):
    """DashGaussian's primitive schedule: at 1/s of the size the budget strategy grows to at most
    1/s^(2 - t) of its growth; at full size (or with follow_resolution=false) to its curve's."""
    from gsexp.train.setup import setup
    from gsexp.train.strategy.budget import BudgetStrategy

    quarter_then_full = lambda step: 4.0 if step < 50 else 1.0  # noqa: E731
    s = BudgetStrategy(budget=1000, refine_start=0, refine_stop=100, downscale_at=quarter_then_full)
    assert s.target(10, 100) == round(100 + 900 * 4.0 ** -1.9)  # 65 more, not the curve's 171
    assert s.target(60, 100) == round(100 + 900 * (1 - 0.4 ** 2))  # full size: the curve
    free = BudgetStrategy(budget=1000, refine_start=0, refine_stop=100, follow_resolution=False,
                          downscale_at=quarter_then_full)
    assert free.target(10, 100) == round(100 + 900 * (1 - 0.9 ** 2))
    run = setup(compose_cfg("strategy=budget", "schedule.resolution=manual", "schedule.downscales=[4,1]",
                            "schedule.steps=[0,15000]", "iterations=100"), tmp_path)
    assert run.strategy.downscale_at(0) == 4 and run.strategy.downscale_at(60) == 1
    assert setup(compose_cfg("strategy=budget"), tmp_path / "plain").strategy.downscale_at is None


def test_the_means_learning_rate_is_held_while_the_images_are_small(compose_cfg, tmp_path):
    """schedule.hold_means_lr: constant until the first level finer than 1/2 size, then 3DGS's
    log-linear decay over the steps left; without a schedule (or the switch) 3DGS's from step 0."""
    from gsexp.train.params import means_lr
    from gsexp.train.setup import setup

    assert means_lr(0, 100, 1.0) == means_lr(40, 100, 1.0, hold=50) == pytest.approx(1.6e-4)
    assert means_lr(75, 100, 1.0, hold=50) == pytest.approx(means_lr(50, 100, 1.0))  # halfway through the decay
    assert means_lr(100, 100, 1.0, hold=50) == pytest.approx(1.6e-6)
    manual = ("schedule.resolution=manual", "schedule.downscales=[4,2,1.5,1]", "schedule.steps=[0,6000,12000,21000]",
              "iterations=100")
    assert setup(compose_cfg(*manual), tmp_path / "a").means_lr_hold == 40  # 1.5 < 2 from step 12000 of 30000
    assert setup(compose_cfg(*manual, "schedule.hold_means_lr=false"), tmp_path / "b").means_lr_hold == 0
    assert setup(compose_cfg("iterations=100"), tmp_path / "c").means_lr_hold == 0


def test_the_frontier_plot_reads_a_sessions_folder(tmp_path):
    """experiments/fast_recipes/frontier.py on the committed H100 session: one point per recipe
    (seeds averaged), the plot written; a folder without runs is one clear error."""
    import subprocess
    import sys

    script, folder = REPO / "experiments/fast_recipes/frontier.py", REPO / "experiments/fast_recipes/h100_2026-12-05"
    out = tmp_path / "frontier.png"
    done = subprocess.run([sys.executable, str(script), str(folder), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "turbo15k:   28.2 s  35.41 dB" in done.stdout and "(2 run(s))" in done.stdout
    assert out.stat().st_size > 10_000
    alex = subprocess.run([sys.executable, str(script), str(REPO / "experiments/fast_recipes/h100_2026-12-06f"),
                           "--out", str(out)], capture_output=True, text=True)  # a session scored on AlexNet alone
    assert alex.returncode == 0, alex.stderr
    assert "turbo15k_nores_split:   27.6 s  35.67 dB  LPIPS 0.0108" in alex.stdout
    bad = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "no runs/ folder" in bad.stderr and "Traceback" not in bad.stderr


def test_time_split_finds_where_the_training_time_went(tmp_path):
    """experiments/fast_recipes/time_split.py: per tenth of the steps, the training clock's seconds
    from metrics.jsonl; here the last half costs twice the first (as at full resolution)."""
    import subprocess
    import sys

    lines = [{"step": s, "train/elapsed_s": s * 0.001 + max(0, s - 500) * 0.001, "train/num_gaussians": 100 + s,
              "train/phase_ms/render": 0.25, "train/phase_ms/backward": 0.5, "train/host_ms": 0.5 + s / 1000}
             for s in range(0, 1001, 100)]
    lines.insert(3, {"step": 250, "eval/psnr": 20.0})  # other rows are skipped
    (tmp_path / "metrics.jsonl").write_text("\n".join(map(json.dumps, lines)))
    script = REPO / "experiments/fast_recipes/time_split.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "| 0-100 | 0.10 | 1.000 | 0.750 | 0.600 | 200 |" in done.stdout  # the GPU's phases summed, the host's
    assert "| 900-1000 | 0.20 | 2.000 | 0.750 | 1.500 | 1,100 |" in done.stdout
    assert "| all | 1.50 |" in done.stdout
    import gzip  # a committed study's gzipped copy: found by its folder, its .gz name or its plain one
    (tmp_path / "gz").mkdir()
    with gzip.open(tmp_path / "gz" / "metrics.jsonl.gz", "wt") as f:
        f.write("\n".join(map(json.dumps, lines)))
    table = [r for r in done.stdout.splitlines() if r.startswith("|")]
    for given in ("gz", "gz/metrics.jsonl.gz", "gz/metrics.jsonl"):
        again = subprocess.run([sys.executable, str(script), str(tmp_path / given)], capture_output=True, text=True)
        assert again.returncode == 0, (given, again.stderr)
        assert [r for r in again.stdout.splitlines() if r.startswith("|")] == table, given
    bad = subprocess.run([sys.executable, str(script), str(tmp_path / "nothing")], capture_output=True, text=True)
    assert bad.returncode == 1 and "no such file" in bad.stderr and "Traceback" not in bad.stderr
    (tmp_path / "summary.json").write_text(json.dumps({"train_seconds": 1.5}, indent=1))  # a summary, not metrics
    bad = subprocess.run([sys.executable, str(script), str(tmp_path / "summary.json")], capture_output=True, text=True)
    assert bad.returncode == 1 and "not a metrics.jsonl" in bad.stderr and "Traceback" not in bad.stderr


def test_host_profile_times_and_profiles_steps_at_each_level(tmp_path):
    """experiments/fast_recipes/host_profile.py: per chosen step, the host's time per step against
    the step's, at that step's training size (on the CPU both are the same work, and no launches)."""
    import subprocess
    import sys

    out = tmp_path / "profile.json"
    done = subprocess.run([sys.executable, str(REPO / "experiments/fast_recipes/host_profile.py"), *TINY,
                           "schedule.resolution=manual", "schedule.downscales=[2,1]", "schedule.steps=[0,3000]",
                           "--at", "10", "20000", "--steps", "2", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [(r["at"], r["size"]) for r in rows] == [(10, "16x16"), (20000, "32x32")]
    assert all(r["host_ms"] > 0 and r["step_ms"] > 0 and r["top_host_ops"] for r in rows)
    assert "| 20000 | 32x32 |" in done.stdout
