"""Is a training step bound by the host? One run's steps profiled at chosen step numbers (issue 40).

    python experiments/fast_recipes/host_profile.py experiment=lego_turbo data.path=/tmp/lego \
        --at 100 16000 --steps 50 [--out host_profile.json]

For each step number in --at (e.g. 100: lego_turbo at 1/4 size in its refine window's first steps;
16000: full size after refinement), --steps consecutive steps of the freshly set-up run (the
initial Gaussians: the host's work depends little on their number, the GPU's does) are timed
three ways: issued without waiting (the host's time per step), issued and waited for (the step's
time), and under torch.profiler (kernel launches per step, and the ops that take the host's
time). Where the host's time nears the step's, fewer launches would speed the step up and a
smaller image would not. On a CPU-only machine the same runs on the CPU (no launches counted).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from gsexp.config import validate  # noqa: E402
from gsexp.train import recipe  # noqa: E402
from gsexp.train.evaluate import synced_clock  # noqa: E402
from gsexp.train.phases import PhaseTimer  # noqa: E402
from gsexp.train.setup import setup  # noqa: E402

LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def timed(run, timer, first: int, steps: int, wait_each: bool) -> float:
    """ms per step over `steps` steps from `first`. wait_each: the GPU waited for after each step
    (the step's time); else the host's time to issue them, less its waits for pair counts (the
    pair budget keeps the host at most a few renders ahead, so a GPU-bound step would otherwise
    look host-bound)."""
    waited = run.pairs.waited_s
    start = synced_clock(run.device)
    for step in range(first, first + steps):
        recipe.train_step(run, step, timer)
        if wait_each:
            synced_clock(run.device)
    issued = time.perf_counter() - start - (run.pairs.waited_s - waited)
    finished = synced_clock(run.device) - start
    return 1e3 * (finished if wait_each else issued) / steps


def profile(run, timer, first: int, steps: int) -> dict:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if run.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for step in range(first, first + steps):
            recipe.train_step(run, step, timer)
        synced_clock(run.device)
    events = prof.key_averages()
    launches = sum(e.count for e in events if e.key in LAUNCHES)
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:20]
    return {"launches_per_step": launches / steps,
            "top_host_ops": [{"op": e.key, "calls_per_step": e.count / steps,
                              "host_us_per_step": e.self_cpu_time_total / steps} for e in top]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="train.py's overrides (experiment=..., data.path=...)")
    parser.add_argument("--at", type=int, nargs="+", default=[100], help="step numbers to profile from")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = validate(compose("train", overrides=["logger=none", *args.overrides]))
    run = setup(cfg, Path(tempfile.mkdtemp(prefix="host_profile_")))
    timer = PhaseTimer(run.device)
    results = []
    for at in args.at:
        camera = run.scene.train_cameras[0]
        if run.resolution is not None:
            camera, _ = run.resolution.view(camera, run.images[0], at)
        timed(run, timer, at, 5, wait_each=True)  # warm-up (and the first renders' exact pair counts)
        row = {"at": at, "size": f"{camera.width}x{camera.height}", "gaussians": len(run.params["means"]),
               "host_ms": timed(run, timer, at, args.steps, wait_each=False),
               "step_ms": timed(run, timer, at, args.steps, wait_each=True),
               **profile(run, timer, at, args.steps)}
        results.append(row)
    print("| from step | size | Gaussians | host ms / step | step ms (waited) | launches / step |")
    print("|---|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['at']} | {r['size']} | {r['gaussians']:,} | {r['host_ms']:.3f} | {r['step_ms']:.3f} "
              f"| {r['launches_per_step']:.0f} |")
    for r in results:
        print(f"\nfrom step {r['at']}: the ops with the most host time (us per step, calls per step)")
        for op in r["top_host_ops"][:12]:
            print(f"  {op['host_us_per_step']:9.1f}  {op['calls_per_step']:6.1f}  {op['op']}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
