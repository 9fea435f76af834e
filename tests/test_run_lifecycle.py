"""A run's lifecycle through train.py (issue 37): resuming never contradicts the model, a signal
stops a run cleanly and resume=auto continues it, bad input files fail before anything is
written, and progress (ETA, evaluation) stays readable."""
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from gsexp.train import interrupt
from gsexp.train.progress import Progress
from test_progress import Clock, run_steps
from test_train_run import REPO, TINY, run_train, summaries, write_transforms_scene


def snapshot(root: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and ".hydra" not in p.parts
            and p.name != "train.log"}  # Hydra itself rewrites .hydra/ and appends to train.log


def test_resume_auto_never_contradicts_the_finished_model(tmp_path):
    run_train([*TINY, "iterations=20", "eval_every=10"], tmp_path)
    before = snapshot(tmp_path)

    fewer = run_train([*TINY, "iterations=10", "eval_every=10", "resume=auto"], tmp_path, check=False)
    out = fewer.stdout + fewer.stderr
    assert fewer.returncode == 2 and "Traceback" not in out, out
    assert "iterations=20 or more" in fewer.stderr and len(fewer.stderr.strip().splitlines()) == 1, fewer.stderr
    assert snapshot(tmp_path) == before  # no summary for 10 steps, no eval_render_000010.png, no checkpoint
    config = OmegaConf.load(next(tmp_path.rglob(".hydra/config.yaml")))
    assert config.iterations == 20  # as trained: tools set the run up again from it

    same = run_train([*TINY, "iterations=20", "eval_every=10", "resume=auto"], tmp_path)
    assert "already trained to 20 steps, nothing to do" in same.stdout
    assert "eval view" not in same.stdout  # no evaluation run again
    assert snapshot(tmp_path) == before  # attempts not counted, nothing rewritten
    (summary,) = summaries(tmp_path).values()
    assert summary["iterations"] == 20 and summary["attempts"] == 1


def start_train(args, root: Path) -> subprocess.Popen:
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "train.py", f"paths.root={root}", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def signal_mid_training(proc: subprocess.Popen, signum: int) -> tuple[str, str]:
    """Send `signum` once the first progress line is out (training under way); (stdout, stderr)."""
    lines = []
    for line in proc.stdout:  # the first line comes after step 1
        lines.append(line)
        if " | ETA " in line:
            break
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=300)
    return "".join(lines) + out, err


def test_ctrl_c_checkpoints_records_and_the_printed_command_continues_the_run(tmp_path):
    args = [*TINY, "iterations=120", "eval_every=0", "checkpoint_every=0"]
    full = run_train(args, tmp_path / "full")
    full_ckpt = torch.load(next((tmp_path / "full").rglob("step_000120.pt")), weights_only=True)

    proc = start_train(args, tmp_path / "cut")
    out, err = signal_mid_training(proc, signal.SIGINT)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err and len(err.strip().splitlines()) == 1, err
    (summary,) = summaries(tmp_path / "cut").values()
    assert summary["status"] == "interrupted" and summary["signal"] == "SIGINT"
    step = summary["step"]
    assert 0 < step < 120 and f"stopped at step {step}/120" in err
    (ckpt,) = (tmp_path / "cut").rglob("step_*.pt")  # checkpoint_every=0: the interrupt's own
    assert ckpt.name == f"step_{step:06d}.pt"

    command = shlex.split(err.split("continue with: ", 1)[1].strip())
    assert command[:2] == ["python", "train.py"] and "resume=auto" in command
    again = subprocess.run([sys.executable, *command[1:]], cwd=REPO, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "WANDB_MODE": "offline"})
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resumed from step {step}" in again.stdout
    resumed = torch.load(next((tmp_path / "cut").rglob("step_000120.pt")), weights_only=True)
    assert torch.equal(resumed["params"]["means"], full_ckpt["params"]["means"])  # as if never stopped
    (summary,) = summaries(tmp_path / "cut").values()
    assert summary["status"] == "ok" and summary["attempts"] == 2 and summary["iterations"] == 120
    # the final evaluation shows progress after training's 100 %
    assert full.stdout.index("step 120/120") < full.stdout.index("eval view 1/1 (100.0%)")


def write_colmap_scene(folder: Path) -> Path:
    """A tiny COLMAP text model (PINHOLE) of the synthetic scene's views, with its points."""
    from torchvision.utils import save_image

    from gsexp.scene import load_scene
    from gsexp.view.cameras import quaternion_of

    scene = load_scene("synthetic", num_gaussians=300, num_views=8, width=24, height=24, num_points=100)
    sparse = folder / "sparse" / "0"
    sparse.mkdir(parents=True)
    (folder / "images").mkdir()
    rows = []
    for i, (cam, img) in enumerate(zip(scene.train_cameras + scene.test_cameras,
                                       scene.train_images + scene.test_images)):
        save_image(img, folder / "images" / f"{i:02d}.png")
        w2c = cam.world_to_camera.double()
        pose = [*quaternion_of(w2c[:3, :3].numpy()), *w2c[:3, 3].tolist()]
        rows.append(f"{i + 1} {' '.join(map(str, pose))} 1 {i:02d}.png\n\n")  # no 2D points
    c = scene.train_cameras[0]
    (sparse / "cameras.txt").write_text(f"1 PINHOLE {c.width} {c.height} {c.fx} {c.fy} {c.cx} {c.cy}\n")
    (sparse / "images.txt").write_text("".join(rows))
    rgb = (scene.point_colors * 255).round().int().tolist()
    (sparse / "points3D.txt").write_text("".join(f"{k + 1} {x} {y} {z} {r} {g} {b} 0\n" for k, ((x, y, z), (r, g, b))
                                                 in enumerate(zip(scene.points.tolist(), rgb))))
    return folder


def test_sigterm_on_a_colmap_scene_stops_cleanly_not_with_pycolmaps_stack_dump(tmp_path):
    pytest.importorskip("pycolmap")
    scene = write_colmap_scene(tmp_path / "scene")
    args = ["data=colmap", f"data.path={scene}", "iterations=2000", "eval_every=0", "logger=none",
            "eval_lpips=false", "model.sh_degree=0", "strategy=none"]
    proc = start_train(args, tmp_path / "out")
    out, err = signal_mid_training(proc, signal.SIGTERM)
    assert proc.returncode == 143, out + err
    assert "stack trace" not in err and "Aborted" not in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "SIGTERM: stopped at step" in err and "resume=auto" in err
    (summary,) = summaries(tmp_path / "out").values()
    assert summary["status"] == "interrupted" and summary["signal"] == "SIGTERM" and summary["step"] > 0
    assert list((tmp_path / "out").rglob(f"step_{summary['step']:06d}.pt"))


def test_a_signal_inside_a_step_waits_for_its_end_and_a_second_one_does_not():
    with interrupt.handled():
        finished = False
        with pytest.raises(interrupt.Interrupted) as raised:
            with interrupt.deferred():
                os.kill(os.getpid(), signal.SIGUSR1)  # SLURM's warning before preemption
                time.sleep(0.01)  # the handler runs here, and must not raise yet
                finished = True
        assert finished and not raised.value.mid_step and raised.value.exit_code == 128 + signal.SIGUSR1

        with pytest.raises(interrupt.Interrupted) as raised:
            with interrupt.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C again: now
                time.sleep(0.01)
                pytest.fail("the second signal did not stop the step")
        assert raised.value.mid_step and raised.value.name == "SIGINT"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handlers are given back


def truncated_ply(path: Path) -> Path:
    from gsexp.gaussians import Gaussians, save_ply

    save_ply(Gaussians.random(1000, (0.0, 0.0, 0.0), 1.0, sh_degree=1), path)
    path.write_bytes(path.read_bytes()[:-5000])
    return path


@pytest.mark.parametrize("case", ["bad json", "missing image", "bad ply"])
def test_a_bad_input_file_is_one_line_and_leaves_no_run_folder_nor_wandb_run(tmp_path, case):
    scene = write_transforms_scene(tmp_path / "scene")
    args = ["data=transforms", f"data.path={scene}", "iterations=5", "eval_lpips=false", "strategy=none",
            "model.num_random=300", "model.sh_degree=0"]  # logger: wandb (offline), the default
    if case == "bad json":
        (scene / "transforms.json").write_text("{ not json")
        needle = "transforms.json is not valid JSON"
    elif case == "missing image":
        for image in (scene / "images").iterdir():
            image.unlink()
        needle = "all 8 of 8 frames whose image is missing"
    else:
        # with the scene broken too: the PLY is read first, so a bad one fails in a second
        (scene / "transforms.json").write_text("{ not json")
        ply = truncated_ply(tmp_path / "model.ply")
        args += ["model.init=ply", f"model.ply={ply}"]
        needle = f"PLY file {ply} is truncated or corrupt"
    proc = run_train(args, tmp_path / "out", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    left = [p for p in (tmp_path / "out").rglob("*") if p != tmp_path / "out" / "runs"]
    assert not left, left  # no run folder, no wandb run


def test_eta_holds_steady_through_a_stalled_interval_and_follows_a_lasting_change():
    clock, out = Clock(), io.StringIO()
    progress = Progress(10000, every_seconds=5.0, stream=out, clock=clock)
    run_steps(progress, clock, 0, 1, 30.0)  # a slow first step (start costs): not the ETA's rate
    run_steps(progress, clock, 1, 1000, 0.1)  # 10 it/s
    step, eta = last_eta(out)
    assert eta == pytest.approx((10000 - step) / 10, abs=1)
    clock.t += 5.0  # the machine busy: one step in 5 s (the last interval alone: 2.6x the ETA)
    progress.update(1001)
    assert last_eta(out)[1] == pytest.approx(eta, rel=0.1)
    run_steps(progress, clock, 1001, 3000, 0.2)  # then 5 it/s for 400 s
    step, eta = last_eta(out)
    assert eta == pytest.approx((10000 - step) / 5, rel=0.05)


def last_eta(out: io.StringIO) -> tuple[int, int]:
    """(step, ETA in seconds) of the last line."""
    fields = out.getvalue().splitlines()[-1].split(" | ")
    minutes, seconds = fields[2].removeprefix("ETA ").split(":")
    return int(fields[0].split()[1].split("/")[0]), 60 * int(minutes) + int(seconds)


def test_evaluation_prints_progress_lines(capsys):
    from gsexp.render.settings import TorchSettings
    from gsexp.scene import load_scene
    from gsexp.scene.synthetic import ground_truth
    from gsexp.track import Logger
    from gsexp.train.evaluate import evaluate

    scene = load_scene("synthetic", num_gaussians=50, num_views=6, width=16, height=16, num_points=0,
                       test_every=2)
    evaluate(ground_truth(50), scene, TorchSettings(), torch.device("cpu"), Logger(), 1, lpips_net=None)
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("eval view")]
    assert lines[0].startswith("eval view 1/3 (33.3%) | ") and lines[-1].startswith("eval view 3/3 (100.0%) | ")
    assert " view/s | ETA " in lines[-1] or " s/view | ETA " in lines[-1]
