"""The 3DGS training recipe: one loop, read top to bottom.

setup (data, init, optimizers, strategy, compression, resume) -> for each step: render a
training view, (1 - λ) L1 + λ (1 - SSIM), backward, densification hooks, Adam -> periodic
eval / checkpoint -> final checkpoint, compression, eval, PLY -> the summary.
"""
from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import torch
from omegaconf import DictConfig

from gsexp.losses import photometric_loss
from gsexp.compress import format as compressed_format
from gsexp.gaussians import make_params, save_ply, to_gaussians
from gsexp.render import render
from gsexp.scene.images import resize_area
from gsexp.schedule import sh_interval_steps
from gsexp.train.checkpoint import save_checkpoint
from gsexp.train.evaluate import evaluate, lpips_available, peak_memory_mb, synced_clock
from gsexp.train.interrupt import Interrupted, deferred
from gsexp.train.optim import fused_adam_step, zero_grads
from gsexp.train.params import means_lr
from gsexp.train.phases import PhaseTimer
from gsexp.train.progress import Progress
from gsexp.train.setup import Inputs, Run, gaussians, payload, setup
from gsexp.view.live import live_viewer


def train(cfg: DictConfig, run_dir: Path, logger, overrides: list[str], inputs: Inputs | None = None) -> dict:
    """Train as `cfg` says, writing checkpoints, renders, point_cloud.ply into run_dir.
    Returns the summary (also written to summary.json by the caller's logger). inputs: what
    load_inputs read (else it is read here). Stopped by a signal (interrupt.py), it checkpoints
    the last finished step and raises Interrupted with where the run stands."""
    run = setup(cfg, run_dir, inputs)
    if run.start:
        logger.rewind(run.start)  # what a killed attempt logged after its checkpoint
    (run_dir / "renders").mkdir(parents=True, exist_ok=True)
    lpips_net = cfg.lpips_net if lpips_available(cfg) else None
    viewer, logger = live_viewer(cfg, run.scene, logger, lambda: gaussians(run))  # viewer.enabled: serve it live
    started, loop_started = time.perf_counter(), time.time()
    paused = {"evaluation": 0.0, "checkpoints": 0.0}  # in the loop but not training: off the clock

    def seconds():  # training time of every attempt: its steps, not its periodic evaluations or checkpoints
        return run.elapsed + time.perf_counter() - started - sum(paused.values())

    saved = done = run.start  # the newest checkpoint's step, the steps finished
    progress = Progress(cfg.iterations, run.start)  # a bar on a terminal, else plain lines (and train.log)
    timer = PhaseTimer(run.device)
    try:
        for step in range(run.start, cfg.iterations):
            with deferred():  # a signal waits for the step to finish
                progress.update(step + 1, **loop_step(run, step, timer, logger, viewer, seconds))
                done = step + 1
            if cfg.eval_every and done % cfg.eval_every == 0 and done < cfg.iterations:
                with pause(paused, "evaluation", run.device):  # the clock read after pause's sync: the step's end
                    evaluate(gaussians(run), run.scene, run.settings, run.device, logger, done, lpips_net=lpips_net,
                             train_seconds=seconds())
            if cfg.checkpoint_every and done % cfg.checkpoint_every == 0 and done < cfg.iterations:
                with pause(paused, "checkpoints", run.device):
                    save_checkpoint(run_dir, done, payload(run, done, seconds()))
                saved = done
        progress.close()
        viewer.close()
        train_seconds, loop_ended = seconds(), time.time()
        if run.filter3d is not None:  # from the trained means: the checkpoint, evaluation and PLY
            run.filter3d.refresh(run.params["means"], force=True)
        save_checkpoint(run_dir, done, payload(run, done, train_seconds))
        saved = done  # what follows (compression, evaluation) changes no checkpoint
        finished = finish(run, run_dir, logger, lpips_net, train_seconds)
    except Interrupted as stop:
        progress.close()
        viewer.close()
        if done > saved and not stop.mid_step:
            save_checkpoint(run_dir, done, payload(run, done, seconds()))
            saved = done
        stop.state = {"step": saved, "iterations": cfg.iterations, "train_seconds": seconds(),
                      "attempts": run.attempts}
        raise
    if run.device.type == "cuda":
        torch.cuda.synchronize(run.device)
    timer.read()
    trained = {"device": run.device.type if run.device.type == "cpu" else torch.cuda.get_device_name(run.device),
               "train_seconds": train_seconds, "paused_s": paused, "phase_ms": timer.medians(),
               "phase_ms_mean": timer.means(), "host_ms": timer.host_ms(),
               "peak_memory_mb": peak_memory_mb(run.device),
               "pair_overflows": run.pairs.settled_overflows(), "pair_padding": run.pairs.padding(),
               **{k: v for extra in run.per_view().values() for k, v in extra.summary().items()}}
    return {**finished, **trained, "attempts": run.attempts, "error": None,
            "overrides": list(overrides), "status": "ok", "loop_started": loop_started, "loop_ended": loop_ended,
            "setup_s": run.setup_s}


@contextlib.contextmanager
def pause(paused: dict, what: str, device: torch.device):
    """Time spent in the block goes to paused[what], not to the training clock. The GPU's queued
    steps are waited for first (once per evaluation or checkpoint), so their time stays training's."""
    start = synced_clock(device)
    try:
        yield
    finally:
        paused[what] += synced_clock(device) - start


def loop_step(run: Run, step: int, timer: PhaseTimer, logger, viewer, clock) -> dict:
    """The loop's work for one step, less evaluation and checkpoints: the step, its log on log
    steps (then returns what the progress line shows, else {}), the live viewer's turn.
    clock(): the training clock (seconds, as summary.json's train_seconds)."""
    step_start = time.perf_counter()
    every = max(run.cfg.log_every, 1)
    log = step % every == 0 or step == run.cfg.iterations - 1
    waited = run.pairs.waited_s
    timer.begin(is_timed(step, every, run.cfg.iterations))
    out, loss, target = train_step(run, step, timer)
    timer.end(waited_s=run.pairs.waited_s - waited)
    shown = log_step(run, logger, step, out, loss, target, time.perf_counter() - step_start, timer.read(),
                     clock, timer.host[-1] if timer.host else None) if log else {}
    viewer.step(step + 1)  # without a browser connected: one flag read
    return shown


def is_timed(step: int, log_every: int, iterations: int) -> bool:
    """Whether PhaseTimer times `step`: the step before each log step, and the first and last.
    Log steps fall on the multiples of 100 where the strategies refine, reset opacities and raise
    the SH degree; timing them sampled refine steps as if typical (in lego_fast's refine window
    every timed step was one)."""
    return step % log_every == log_every - 1 or step == 0 or step == iterations - 1


def train_step(run: Run, step: int, timer: PhaseTimer):
    """One optimisation step on batch_size training views: (the last view's render output, the
    loss, its target). k views: the mean of their losses, one backward, one Adam step."""
    cfg, params, optimizers, state = run.cfg, run.params, run.optimizers, run.state
    k = cfg.batch_size
    views = [next_view(run) for _ in range(k)]
    sh_degree = min(step // sh_interval_steps(cfg.sh_degree_interval, k), cfg.model.sh_degree) \
        if cfg.sh_degree_interval else cfg.model.sh_degree
    lr = means_lr(step, cfg.iterations, run.scene.extent, run.means_lr_hold)
    for group in optimizers["means"].param_groups:  # x sqrt(k) as the other rates (params.scale_for_batch)
        group["lr"] = lr * (math.sqrt(k) if k > 1 else 1)
    # A random background (as 3DGS's option) regularises: targets keep the scene's own.
    bg = torch.rand(3).tolist() if cfg.random_background else tuple(run.scene.background)

    if run.filter3d is not None:  # every 100 steps, and after densification changed the count
        run.filter3d.refresh(params["means"], step)
    rendered, loss = [], 0.0
    for view in views:
        out, camera, view_loss, target = view_loss_of(run, view, step, bg, sh_degree, timer)
        rendered.append((out, camera))
        loss = view_loss if k == 1 else loss + view_loss / k
    for extra in (run.strategy.regularization(params), run.compression.regularization(params)):
        if torch.is_tensor(extra) or extra != 0:  # adding a plain 0 would still cost a launch each way
            loss = loss + extra
    timer.mark("loss")
    run.strategy.step_pre_backward(params, optimizers, state, step, out)
    loss.backward()
    timer.mark("backward")
    for i, (seen, camera) in enumerate(rendered):
        if k > 1:  # each view's screen gradient as if it trained alone: the loss took 1/k of it
            for grad in (seen.means2d.grad, seen.means2d_absgrad):
                if grad is not None:
                    grad.mul_(k)
        if i < k - 1:  # statistics only; the last view's call also refines, once a step
            run.strategy.observe(params, state, step, seen, camera.width, camera.height)
    run.strategy.step_post_backward(params, optimizers, state, step, out, camera.width, camera.height,
                                    lr=optimizers["means"].param_groups[0]["lr"])
    run.compression.post_backward(params, state)
    timer.mark("densify")
    optimizer_step(run, [seen for seen, _ in rendered])
    timer.mark("optimizer")
    run.compression.step(params, optimizers, state, step, run.scene.train_cameras)
    timer.mark("densify")
    return out, loss, target


def next_view(run: Run) -> int:
    if not run.order:  # a fresh random pass over the training views
        run.order = torch.randperm(len(run.images)).tolist()
    return run.order.pop()


def view_loss_of(run: Run, view: int, step: int, bg, sh_degree: int, timer: PhaseTimer):
    """Render training view `view` and score it: (render output, camera, loss, target)."""
    cfg, params = run.cfg, run.params
    camera, target = run.scene.train_cameras[view], run.images[view]
    mask = run.masks[view] if run.masks is not None else None
    if run.resolution is not None:  # schedule.resolution: this step's size, camera scaled to it
        camera, target = run.resolution.view(camera, target, step)
        if mask is not None:
            mask = resize_area(mask, camera.width, camera.height)
    # Densification changed N, or the schedule the size, since the last render: its pair count
    # says little about this one.
    capacity = run.pairs.capacity(exact=(len(params["means"]), camera.width) != run.last_shape)
    g = gaussians(run) if run.pose is None else run.pose.apply(gaussians(run), view)
    out = render(g, camera, run.settings, background=bg, sh_degree=sh_degree, capacity=capacity)
    run.pairs.record(out.num_pairs, capacity)
    run.last_shape = (len(params["means"]), camera.width)
    timer.mark("render")
    image = out.image if run.appearance is None else run.appearance.apply(out.image, view)
    if mask is None:
        loss = photometric_loss(image, target, cfg.ssim_lambda, fused=cfg.fused_ssim)
    else:  # data.masks: masked pixels leave L1 and SSIM (both images masked, as gsplat's trainer)
        loss = photometric_loss(image * mask, target * mask, cfg.ssim_lambda, fused=cfg.fused_ssim)
    for extra in run.per_view().values():
        loss = loss + extra.regularization(view)
    timer.mark("loss")
    return out, camera, loss, target


def optimizer_step(run: Run, outs: list) -> None:
    """Adam on every parameter: one fused launch on a GPU (sparse_adam: only the Gaussians the
    step's views saw move, as Taming 3DGS), opt.step() on a CPU or with fused_adam=false (then
    torch.optim.Adam's own step)."""
    optimizers, n = run.optimizers, len(run.params["means"])
    if (run.device.type == "cuda" and run.cfg.fused_adam) or run.cfg.sparse_adam:
        # A refine this step changed N: its new rows have no visibility yet, so step them all.
        visible = None
        if run.cfg.sparse_adam and len(outs[0].radii) == n:
            visible = outs[0].radii > 0
            for out in outs[1:]:
                visible |= out.radii > 0
        fused_adam_step(optimizers, visible)
    else:
        for opt in optimizers.values():
            opt.step()
    zero_grads(optimizers)
    # What the views own beside the model (appearance, pose): dense, one more fused launch.
    extras = {name: extra.optimizer for name, extra in run.per_view().items()}
    if extras and run.device.type == "cuda" and run.cfg.fused_adam:
        fused_adam_step(extras)
        zero_grads(extras)
    else:
        for extra in run.per_view().values():
            extra.step()


def log_step(run: Run, logger, step: int, out, loss, target, step_seconds: float, phase_ms, clock,
             host_ms: float | None = None) -> dict:
    """Log the step's values; returns what the progress line shows. phase_ms: the newest
    finished timed step's (on a GPU an earlier one's: no sync); host_ms: the host's time to issue
    the newest timed step (PhaseTimer). clock(): the training clock,
    logged as train/elapsed_s once this step has finished (the PSNR's read waits for it), so that
    the time between log steps shows what densification or a resolution change cost."""
    with torch.no_grad():
        train_psnr = -10 * math.log10(max(((out.image - target) ** 2).mean().item(), 1e-12))
    n = len(run.params["means"])
    logger.log({"train/loss": loss.item(), "train/psnr": train_psnr, "train/num_gaussians": n,
                "train/step_seconds": step_seconds, "train/elapsed_s": clock(),
                "train/peak_memory_mb": peak_memory_mb(run.device),
                **{f"train/stage_ms/{k}": v for k, v in out.stage_ms.items()},
                **{f"train/phase_ms/{k}": v for k, v in (phase_ms or {}).items()},
                **({"train/host_ms": host_ms} if host_ms is not None else {})}, step)
    return {"loss": loss.item(), "psnr": train_psnr, "num_gaussians": n}


def finish(run: Run, run_dir: Path, logger, lpips_net, train_seconds: float) -> dict:
    """Compression, evaluation and PLY after the final checkpoint; the summary's results."""
    cfg, iterations = run.cfg, run.cfg.iterations
    arrays = run.compression.finalize(run.params, run.scene.train_cameras, cfg.model.sh_degree, run.state)
    uncompressed = None
    if arrays is not None:  # evaluate and export what the compressed file holds
        # ... and what training ended with, so that a study can split pruning's loss from the VQ's
        before = evaluate(gaussians(run), run.scene, run.settings, run.device, logger, iterations,
                          lpips_net=lpips_net, prefix="eval_uncompressed")
        uncompressed = {k: before[k] for k in ("psnr", "ssim", "lpips")}
        size_mb = compressed_format.save(run_dir / "compressed.npz", arrays)
        run.params = {k: v.to(run.device) for k, v in make_params(compressed_format.decode(arrays)).items()}
    evaluated = time.perf_counter()
    result = evaluate(gaussians(run), run.scene, run.settings, run.device, logger, iterations,
                      lpips_net=lpips_net, renders_dir=run_dir / "renders", train_seconds=train_seconds)
    evaluated = time.perf_counter() - evaluated
    ply = run_dir / "point_cloud.ply"
    model = to_gaussians({k: v.detach() for k, v in run.params.items()}, cfg.model.sh_degree)
    if run.filter3d is not None:  # the model as rendered, for any viewer
        model = run.filter3d.apply(model).detach()
    save_ply(model.to("cpu"), ply)
    if arrays is None:
        size_mb = ply.stat().st_size / 2**20
    return {"psnr": result["psnr"], "cc_psnr": result["cc_psnr"], "ssim": result["ssim"], "lpips": result["lpips"],
            "per_view": result["per_view"], "eval_views": len(result["per_view"]),  # every test view the scene has (staged lego: 25 of 200)
            "num_gaussians": len(run.params["means"]),
            "iterations": iterations, "size_mb": size_mb, "render_ms": result["render_ms"],
            "stage_ms": result["stage_ms"], "uncompressed": uncompressed, "eval_seconds": evaluated}
