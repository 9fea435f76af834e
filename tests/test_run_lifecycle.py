"""A run's lifecycle through train.py (issue 37): resuming never contradicts the model, a signal
stops a run cleanly and resume=auto continues it, bad input files fail before anything is
written, and progress (ETA, evaluation) stays readable."""
import io

import pytest
import torch

from gsexp.train.progress import Progress
from test_progress import Clock, run_steps


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
