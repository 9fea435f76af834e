"""What `viewer.enabled=true` costs a training step with no browser connected, measured in
alternating blocks of the training loop on one model.

    python experiments/viewer/overhead.py <run dir> [--steps 1000] [--rounds 4] [--json overhead.json]

Loads the run's config and newest checkpoint (as resume=auto; past densification the model
size is fixed), then runs blocks of `--steps` steps of the training loop (`loop_step`: the
step, its log on log steps, the viewer's turn) with the viewer off and on, in the order
off on, on off, off on, ... Each "on" block starts the viewer's server (port 0) before its
clock and closes it after, so the server thread runs through it as in training. Prints the
wall ms per step of every block, the medians and the overhead of "on" against "off"."""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from gsexp.track.base import Logger
from gsexp.train.phases import PhaseTimer
from gsexp.train.recipe import gaussians, loop_step
from gsexp.train.setup import resume_run
from gsexp.view.live import live_viewer


def block(run, first: int, steps: int, enabled: bool) -> float:
    """Wall ms per step of `steps` loop steps from step `first`, the viewer on or off."""
    cfg = OmegaConf.create({"viewer": {"enabled": enabled, "host": "127.0.0.1", "port": 0, "every_s": 1.0}})
    viewer, logger = live_viewer(cfg, run.scene, Logger(), lambda: gaussians(run))
    timer = PhaseTimer(run.device)
    try:
        sync = torch.cuda.synchronize if run.device.type == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        for step in range(first, first + steps):
            loop_step(run, step, timer, logger, viewer, lambda: time.perf_counter() - start)
        sync()
        return (time.perf_counter() - start) / steps * 1e3
    finally:
        viewer.close()


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--steps", type=int, default=1000, help="steps per block")
    p.add_argument("--rounds", type=int, default=4, help="pairs of blocks (off, on)")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    if a.steps < 1 or a.rounds < 1:
        p.error("--steps and --rounds must be >= 1")
    try:
        run = resume_run(a.run_dir)
    except FileNotFoundError as e:
        p.error(str(e))
    step = run.start
    block(run, step, min(a.steps, 50), False)  # warm-up: allocator, caches, pair budget
    step += min(a.steps, 50)
    ms = {False: [], True: []}
    for r in range(a.rounds):
        for enabled in ((False, True) if r % 2 == 0 else (True, False)):
            ms[enabled].append(block(run, step, a.steps, enabled))
            step += a.steps
            print(f"round {r + 1} viewer {'on ' if enabled else 'off'}: {ms[enabled][-1]:.3f} ms/step", flush=True)
    off, on = statistics.median(ms[False]), statistics.median(ms[True])
    result = {"run_dir": str(a.run_dir), "steps_per_block": a.steps, "rounds": a.rounds,
              "num_gaussians": len(run.params["means"]), "device": str(run.device),
              "ms_per_step": {"off": ms[False], "on": ms[True]}, "median_off": off, "median_on": on,
              "overhead_percent": (on - off) / off * 100}
    print(f"median ms/step: off {off:.3f}, on {on:.3f}; overhead {result['overhead_percent']:+.2f} % "
          f"({len(run.params['means']):,} Gaussians, {run.device})")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
