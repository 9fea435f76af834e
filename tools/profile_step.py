"""Where a training step's time goes on a GPU: more steps of a finished run, free-running and
under torch.profiler.

    python tools/profile_step.py <run dir> [--steps 100] [--top 20] [--set key=value ...] [--stack]

Loads the run's config and newest checkpoint (as resume=auto), then trains on from there:
past densification, so the model size is fixed. Prints the free-running wall ms per step
(what training pays), the GPU busy ms per step (the kernels' sum: when it is well below the wall
time, the CPU or host syncs are the limit), the kernels that take the most GPU time, the ops
that take the most CPU time and the launches per step.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from gsexp.train.phases import PhaseTimer
from gsexp.train.recipe import train_step
from gsexp.train.setup import resume_run


def steps(run, n: int, timer: PhaseTimer) -> float:
    """Wall seconds of n steps, from a synchronised start to a synchronised end."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(n):
        timer.begin(i % 10 == 0)
        train_step(run, run.start + i, timer)
        timer.end()
    torch.cuda.synchronize()
    t = time.perf_counter() - t
    timer.read()
    return t


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override the run's config, e.g. rasterizer.backward=gemm_fp32")
    p.add_argument("--stack", action="store_true",
                   help="also print the CPU table by Python call site: which line issues each small op")
    a = p.parse_args(argv)
    for item in a.set:
        if "=" not in item:
            p.error(f"--set {item!r}: expected KEY=VALUE, e.g. rasterizer.backward=gemm_fp32")
    try:
        run = resume_run(a.run_dir, a.set)
    except FileNotFoundError as e:
        p.error(str(e))
    timer = PhaseTimer(run.device)
    steps(run, 20, timer)  # warm-up: allocator, caches, pair budget
    wall = steps(run, a.steps, timer) / a.steps * 1e3
    # verbose: without it this torch records no Python frames for the stack table
    stack = {"with_stack": True, "experimental_config": torch._C._profiler._ExperimentalConfig(verbose=True)} \
        if a.stack else {}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **stack) as prof:
        steps(run, 20, timer)
    # kernels only: an autograd Function's row also counts the kernels it launched as its own
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    gpu = sum(e.device_time_total for e in kernels) / 20 / 1e3
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=a.top))
    # and where the CPU's time goes: when it sets the pace, these rows are the step's cost
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.top))
    if a.stack:
        print(prof.key_averages(group_by_stack_n=4).table(sort_by="self_cpu_time_total", row_limit=3 * a.top))
    launches = sum(1 for e in prof.events() if e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                                           "cudaMemsetAsync", "cudaMemcpyAsync"))
    print(f"launches, memsets and copies per step: {launches / 20:.1f}")
    print(f"Gaussians {len(run.params['means']):,}  phases (GPU ms) {timer.medians()}")
    print(f"free-running wall {wall:.3f} ms/step, GPU kernels {gpu:.3f} ms/step ({a.steps} + 20 profiled steps)")


if __name__ == "__main__":
    main()
