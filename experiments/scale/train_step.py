"""A training step's time and peak memory on a fixed model: gsexp's own step, or the peer's.

    python experiments/scale/train_step.py --ply lego_3M.ply --trainer gsexp|gsplat --out step.json \
        [--data-path <lego>] [--steps 100] [--warmup 20] [--set key=value ...] [--profile N]

Both take the model from the PLY and train on lego's views from step 20,000 of 30,000 (after
densification, SH degree 3), so only the step's own cost is measured:
- gsexp: `train_step` of the trainer as `experiment=lego_fast` configures it (fused loss and
  Adam, tc_gs + accutile); `--set` overrides the config, e.g. `--set rasterizer=vanilla`.
- gsplat: the step of the project's peer harness (experiments/peers/gsplat_trainer.py, gsplat's
  examples/simple_trainer.py semantics) at that point of its run, with whichever gsplat the path
  gives (main or 1.5.3): `rasterization` (packed=False), the loss through fused_ssim (refused
  without it), DefaultStrategy's hooks, one fused torch Adam per group, the means lr decayed.
Prints and writes: the median step time (CUDA events around each step), the free-running wall
time per step, and the peak memory allocated (model, optimizer state and the step's buffers);
with --profile N, then N more steps under torch.profiler: the kernels that take the most time
per step (and gsexp's phases), to say where one trainer's step is longer than the other's.
Run one trainer per process: the peak is then that trainer's alone."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
START, ITERATIONS = 20_000, 30_000


def lego_path(arg: Path | None) -> Path:
    return arg or Path(os.environ.get("GSEXP_SHARED", REPO.parent / "shared")) / "data/nerf_synthetic/lego"


def gsexp_step(a):
    """(step(i, phases=False), number of Gaussians, device, extra()) for gsexp's trainer; extra()
    says how many renders overflowed their pair capacity (they dropped pairs, so their step is not
    the real one) and the phases of the steps that timed them."""
    import tempfile

    from hydra import compose, initialize_config_dir

    from gsexp.config import force_rasterizer_switches, validate
    from gsexp.train.phases import PhaseTimer
    from gsexp.train.recipe import train_step
    from gsexp.train.setup import setup

    overrides = ["experiment=lego_fast", f"data.path={lego_path(a.data_path)}", "model.init=ply",
                 f"model.ply={a.ply}", "logger=none", f"iterations={ITERATIONS}", *a.set]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = validate(compose("train", overrides=force_rasterizer_switches(overrides)))
    run = setup(cfg, Path(tempfile.mkdtemp(prefix="gsexp_step_")))
    timer = PhaseTimer(run.device)

    def step(i, phases=False):  # phases only in the profile pass: their events cost the timed steps
        timer.begin(phases)
        train_step(run, START + i, timer)
        timer.end()

    def extra():
        timer.read()
        return {"pair_overflows": run.pairs.settled_overflows(),
                **({"phase_ms": timer.medians()} if timer.medians() else {})}

    return step, len(run.params["means"]), run.device, extra


def gsplat_step(a):
    """(step(i, phases=False), number of Gaussians, device, extra()) for the peer harness's step at
    the same point of its run (it has no phases to time)."""
    import gsplat

    sys.path.insert(0, str(REPO / "experiments" / "peers"))
    import gsplat_trainer as trainer
    from gsplat_api import PostBackward, make_loss, optional_module

    from gsexp.gaussians import load_ply
    from gsexp.scene import load_scene

    dev = torch.device("cuda")
    fused = optional_module("fused_ssim")  # main's ssim_loss calls it when importable, 1.5.3's loss directly
    loss, ssim_source = make_loss(0.2, optional_module("gsplat.losses"), fused)
    if fused is None:
        sys.exit(f"train_step.py: the peer's loss would not run fused_ssim ({ssim_source}); stage fused-ssim "
                 "(experiments/peers/build_wheels.sh)")
    scene = load_scene("blender", lego_path(a.data_path), background=(1.0, 1.0, 1.0))
    opts = trainer.TrainerOptions(iterations=ITERATIONS)
    splats = trainer.splats_of(load_ply(a.ply).with_sh_degree(3), dev)
    optimizers = trainer.make_optimizers(splats, scene.extent, opts)
    for group in optimizers["means"].param_groups:  # the decay's value at START (st:811)
        group["lr"] *= opts.means_lr_final ** (START / ITERATIONS)
    schedulers = [torch.optim.lr_scheduler.ExponentialLR(optimizers["means"], opts.means_lr_final ** (1 / ITERATIONS))]
    strategy = gsplat.strategy.DefaultStrategy()
    state = strategy.initialize_state(scene_scale=scene.extent)
    post_backward = PostBackward(strategy)
    post_backward.attach(splats)
    background = torch.tensor([scene.background], dtype=torch.float32, device=dev)
    peer = trainer.Peer(gsplat.rasterization, strategy, post_backward, loss, opts, background)
    views = trainer.views_of(scene.train_cameras, scene.train_images, dev)
    order = []

    def step(i, phases=False):
        if not order:
            order.extend(torch.randperm(len(views)).tolist())
        trainer.step(peer, splats, optimizers, schedulers, state, START + i, views[order.pop()])

    return step, len(splats["means"]), dev, lambda: {"gsplat": gsplat.__version__, "ssim": ssim_source}


def measure(step, device, warmup: int, n: int) -> dict:
    for i in range(warmup):
        step(i)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    events = []
    t = time.perf_counter()
    for i in range(warmup, warmup + n):
        if cuda:
            events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
            events[-1][0].record()
        step(i)
        if cuda:
            events[-1][1].record()
    if cuda:
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / n * 1e3
    per_step = [a.elapsed_time(b) for a, b in events] if cuda else [wall]
    return {"step_ms_median": statistics.median(per_step), "wall_ms_per_step": wall, "steps": n,
            "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}


def profile_steps(step, device, start: int, n: int, top: int) -> dict:
    """Where the step's time goes: n more steps under torch.profiler; the kernels (on a CPU the
    ops) that take the most time, in ms per step."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for i in range(start, start + n):
            step(i, phases=True)
        if cuda:
            torch.cuda.synchronize()
    totals: dict[str, float] = {}
    if cuda:  # kernels, memsets and copies: an op's row would also count the kernels it launched
        for e in prof.events():
            if e.device_type == DeviceType.CUDA:
                totals[e.name] = totals.get(e.name, 0.0) + e.device_time_total
    else:
        for e in prof.key_averages():
            totals[e.key] = e.self_cpu_time_total
    rows = sorted(totals.items(), key=lambda kv: -kv[1])
    return {"steps": n, "kind": "GPU kernels" if cuda else "CPU ops (self time)",
            "total_ms_per_step": sum(totals.values()) / n / 1e3,
            "top": [{"name": k[:160], "ms_per_step": v / n / 1e3} for k, v in rows[:top]]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ply", type=Path, required=True)
    p.add_argument("--trainer", choices=("gsexp", "gsplat"), required=True)
    p.add_argument("--data-path", type=Path, help="lego (default: $GSEXP_SHARED/data/nerf_synthetic/lego)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="gsexp config override")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="then N more steps under torch.profiler: the top kernels in ms per step, and "
                        "gsexp's phases (render, loss, backward, densify, optimizer)")
    p.add_argument("--top", type=int, default=15, help="kernels listed by --profile")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if not a.ply.is_file():
        p.error(f"--ply {a.ply}: no such file")
    if a.steps < 1 or a.warmup < 1 or a.profile < 0:
        p.error("--steps and --warmup must be >= 1 (the warm-up sizes the pair buffers), --profile >= 0")
    if a.set and a.trainer != "gsexp":
        p.error("--set overrides gsexp's config; the peer has none")
    step, n, device, extra = (gsexp_step if a.trainer == "gsexp" else gsplat_step)(a)
    result = {"trainer": a.trainer, "ply": str(a.ply), "num_gaussians": n, "set": a.set,
              "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              **measure(step, device, a.warmup, a.steps)}
    if a.profile:  # after the timed steps, so profiling never slows what they measure
        result["profile"] = profile_steps(step, device, a.warmup + a.steps, a.profile, a.top)
    result.update(extra())
    print(json.dumps(result))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
