"""Train a 3DGS scene: python train.py [group=option ...] [key=value ...] [-m for sweeps].

The recipe lives in gsexp/train/recipe.py; this file wires Hydra, validation, tracking and
the failure policy: a failed job writes summary.json with status 'failed' and the error;
inside a multirun the other jobs go on, a single run exits non-zero. Inputs (scene, PLY,
checkpoint) are read before anything is written. Ctrl+C, SIGTERM, SIGUSR1 or SIGUSR2 checkpoint the last
finished step, write status 'interrupted' and print the command that continues the run.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from gsexp import overrides
from gsexp.atomic import atomic_write
from gsexp.config import check_machine, force_rasterizer_switches, validate
from gsexp.errors import ConfigError, InvalidCombination
from gsexp.sweep import gpu_pool
from gsexp.sweep import slurm
from gsexp.train import interrupt
from gsexp.train.interrupt import Interrupted
from gsexp.track import make_logger, run_name_from_overrides, tags_from_choices
from gsexp.track.local import LocalLogger

log = logging.getLogger("gsexp.train")
# The run folder's name: `name=` when given, else the overrides (less those that do not change
# what is trained, e.g. iterations and resume, so that a finished run can be extended).
OmegaConf.register_new_resolver(
    "gsexp_run_name", lambda s, name=None: name or run_name_from_overrides(s.split(",") if s else []), replace=True)
# Parallel jobs for hydra/launcher=gpus: jobs_per_gpu per GPU, or half the cores for CPU jobs.
OmegaConf.register_new_resolver("gsexp_pool_size", lambda jobs_per_gpu=1: len(gpu_pool.visible_devices()) * jobs_per_gpu
                                or max(1, (os.cpu_count() or 2) // 2), replace=True)


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig):
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    overrides = list(hc.overrides.task)
    sweep = hc.mode == RunMode.MULTIRUN
    # when the process started (a sweep's process may have run other jobs) and when the imports
    # and Hydra were done: the start-up's parts in summary.json's overhead_s
    begun = {"process": time.time() if sweep else process_start(), "main": time.time()}
    with interrupt.handled():  # Ctrl+C, SIGTERM, SIGUSR1/2: checkpoint, record, say how to go on
        try:
            return start(cfg, hc, run_dir, overrides, sweep, begun)
        except Interrupted as stop:
            print(stop_line(run_dir, stop, overrides, sweep), file=sys.stderr)
            if not (sweep and "SUBMITIT_FOLDER" in os.environ):
                raise SystemExit(stop.exit_code)  # in a local multirun too: the user stops the whole sweep
            if not slurm.hands_over(stop.signum):
                # a job in a process of its own (SLURM, submitit_local): the job stops, its sweep goes
                # on, and the launcher learns of its end only from a returned result
                return read_summary(run_dir) or {"status": "interrupted", "signal": stop.name}
    # Reached only by a submitit job sent SLURM's warning before preemption or the time limit: the
    # run is checkpointed; submitit's own handler (back now) requeues the job, and its next start
    # resumes. A preemption is requeued always, a time limit up to hydra.launcher.max_num_timeout times.
    signal.raise_signal(slurm.requeue_warning())


def start(cfg: DictConfig, hc, run_dir: Path, overrides: list[str], sweep: bool, begun: dict):
    try:
        cfg = validate(cfg, sweep)
        if slurm.requeued() and not cfg.resume:  # a requeued SLURM job continues where it was stopped
            cfg.resume = "auto"
        check_machine(cfg)
        from gsexp.train.setup import load_inputs, resume_checkpoint  # heavy imports after the config is known good

        checkpoint = resume_checkpoint(cfg, run_dir)
        if (done := already_trained(run_dir, cfg, checkpoint)) is not None:
            print(f"[gsexp] {run_dir}: already trained to {cfg.iterations} steps, nothing to do (summary.json "
                  "holds its results); pass a larger iterations= with resume=auto to train on")
            return done["psnr"]
        inputs = load_inputs(cfg, checkpoint)  # the scene and PLY read, so checked, before anything is written
        begun["inputs"] = time.time()
    except Exception as err:
        if sweep:  # the sweep's table lists the job as invalid (or failed)
            record_failure(run_dir, err, overrides)
        else:  # nothing of a run that never started stays behind
            remove_if_only_hydra(run_dir)
            keep_trained_config(run_dir)
        return fail(run_dir, err, sweep, started=False)
    try:
        with gpu_pool.claim(Path(hc.sweep.dir) / ".gpu_locks") if sweep else nullcontext() as gpu:
            summary = run(cfg, hc, run_dir, overrides, gpu, inputs, begun)
        print(f"[gsexp] {run_dir}: test PSNR {summary['psnr']:.2f} dB, SSIM {summary['ssim']:.4f}, "
              f"LPIPS {summary['lpips'] if summary['lpips'] is None else round(summary['lpips'], 4)}, "
              f"{summary['num_gaussians']} Gaussians, {summary['train_seconds']:.0f} s")
        return summary["psnr"]
    except Exception as err:  # the run is recorded as failed; nothing already written is touched
        record_failure(run_dir, err, overrides)
        return fail(run_dir, err, sweep, started=True)


def keep_trained_config(run_dir: Path) -> None:
    """Hydra rewrote .hydra/config.yaml with a command that was then refused (e.g. fewer
    iterations than trained): put back the config the newest checkpoint was trained with, which
    tools read to set the run up again (setup.resume_run)."""
    from gsexp.train.checkpoint import latest_checkpoint, load_checkpoint

    newest = latest_checkpoint(run_dir)
    if newest is not None and (run_dir / ".hydra").is_dir():
        OmegaConf.save(OmegaConf.create(load_checkpoint(newest)["config"]), run_dir / ".hydra" / "config.yaml")


def already_trained(run_dir: Path, cfg: DictConfig, checkpoint) -> dict | None:
    """The summary of a finished run that resume would add nothing to: its newest checkpoint is
    at `iterations` and its summary holds that model's results. Else None."""
    if checkpoint is None or checkpoint[1]["step"] != cfg.iterations:
        return None
    summary = read_summary(run_dir) or {}  # none: killed before its summary, the evaluation is still to do
    return summary if summary.get("status") == "ok" and summary.get("iterations") == cfg.iterations else None


def stop_line(run_dir: Path, stop: Interrupted, overrides: list[str], sweep: bool) -> str:
    """One line: where the run stopped and the command that continues it (also in the run's log)."""
    again = continue_command(run_dir, overrides, sweep)
    step = stop.state.get("step")
    if step is None:
        remove_if_only_hydra(run_dir)
        text = f"[gsexp] {stop.name}: stopped before training started; start again with: {again}"
    else:
        where = f"at step {step}/{stop.state['iterations']}" + (", checkpointed" if step else "")
        text = f"[gsexp] {stop.name}: stopped {where} ({run_dir}); continue with: {again}"
        to_log_file(text)
    return text


def read_summary(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def continue_command(run_dir: Path, overrides: list[str], sweep: bool) -> str:
    """The command line that resumes this run: its overrides with resume=auto (a sweep's job:
    and its folder, which a single run would not choose)."""
    args = [o for o in overrides if not o.startswith("resume=")] + ["resume=auto"]
    if sweep:
        args.append(f"hydra.run.dir={run_dir}")
    return shlex.join(["python", sys.argv[0], *args])


def record_interrupt(run_dir: Path, logger, stop: Interrupted, overrides: list[str], sweep: bool) -> None:
    """summary.json says where the run stands. It replaces an earlier attempt's results: the newest
    checkpoint is past them, and the run's own results come when it finishes."""
    values = {"status": "interrupted", "signal": stop.name, **stop.state, "error": None,
              "overrides": overrides, "resume": continue_command(run_dir, overrides, sweep)}
    with atomic_write(run_dir / "summary.json") as f:
        f.write(json.dumps(values, indent=2).encode())
    logger.summary(values)


def is_user_error(err: Exception) -> bool:
    """Bad config, data, input files or environment: one line, no traceback on the console."""
    from gsexp.render.cuda.build import CudaUnavailable

    return isinstance(err, (ValueError, FileNotFoundError, NotADirectoryError, CudaUnavailable))


def fail(run_dir: Path, err: Exception, sweep: bool, started: bool):
    """A user error prints one line (its traceback goes to the run's train.log) and exits with 2;
    a bug prints its traceback and exits with 1. Inside a multirun the other jobs go on."""
    user = is_user_error(err)
    if started:
        to_log_file("".join(traceback.format_exception(err)))
    if not user:
        traceback.print_exception(err)
    where = f" ({run_dir})" if started else ""
    print(f"[gsexp] error{where}: {err}", file=sys.stderr)
    if sweep:
        return None
    raise SystemExit(2 if user else 1)


def to_log_file(text: str) -> None:
    """Into the run's train.log (Hydra's file handler) and not onto the console."""
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, text, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def remove_if_only_hydra(run_dir: Path) -> None:
    """Hydra makes the run folder before validation; remove it when it holds nothing else."""
    if not run_dir.is_dir():
        return
    extra = [p for p in run_dir.iterdir() if p.name not in (".hydra", "train.log")]
    log_file = run_dir / "train.log"
    if not extra and (not log_file.exists() or log_file.stat().st_size == 0):
        shutil.rmtree(run_dir, ignore_errors=True)


def process_start() -> float:
    """When this process started (wall time; Linux's /proc), so that imports count; else now."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def run(cfg: DictConfig, hc, run_dir: Path, overrides: list[str], gpu: str | None, inputs, begun: dict) -> dict:
    import torch

    from gsexp.train.recipe import train

    with make_logger(cfg.logger.kind, run_dir, project=cfg.logger.project, mode=cfg.logger.mode,
                     group=run_group(hc),
                     name=run_name_from_overrides(overrides), tags=tags_from_choices(dict(hc.runtime.choices)),
                     config=OmegaConf.to_container(cfg, resolve=True)) as logger:
        started = time.time()
        try:
            summary = train(cfg, run_dir, logger, overrides, inputs)
        except Interrupted as stop:
            record_interrupt(run_dir, logger, stop, overrides, hc.mode == RunMode.MULTIRUN)
            raise
        summary["torch_threads"] = torch.get_num_threads()  # CPU threads (a local sweep shares the cores)
        # per-job overhead: start-up (imports, data, set-up: extension, init, resume) and the end
        # (evaluation, PLY), each with its parts
        loop_started = summary.pop("loop_started")
        summary["overhead_s"] = {"to_first_step": loop_started - begun["process"],
                                 "imports": begun["main"] - begun["process"],
                                 "load_inputs": begun["inputs"] - begun["main"],
                                 "setup": loop_started - begun["inputs"],
                                 "setup_parts": summary.pop("setup_s"),
                                 "after_last_step": time.time() - summary.pop("loop_ended"),
                                 "evaluation": summary.pop("eval_seconds"),
                                 # slow imports that bring torch._dynamo; none is needed (issue 39)
                                 "slow_imports": sorted(m for m in SLOW_IMPORTS if m in sys.modules)}
        if gpu is not None:  # the pool's device (CUDA_VISIBLE_DEVICES of this job), as nvidia-smi sees it
            summary.update(gpu=gpu, started=started, ended=time.time(), **gpu_pool.nvidia_smi_record(gpu))
        summary.update(slurm.job_record())
        logger.summary(summary)
    return summary


SLOW_IMPORTS = ("torch._dynamo", "torchvision", "torchmetrics", "lpips")


def run_group(hc) -> str:
    """The dashboard group: the sweep for a multirun, else the experiment overlay (or 'train')."""
    if hc.mode == RunMode.MULTIRUN:
        return f"sweep-{Path(hc.sweep.dir).name}"
    return hc.runtime.choices.get("experiment") or hc.job.name


def record_failure(run_dir: Path, err: Exception, overrides: list[str]):
    """summary.json with status 'failed' (or 'invalid') — unless it already holds a finished run's results,
    which a failed re-run must not overwrite (then failure.json beside it)."""
    # "invalid": the config was rejected before any work (in a sweep: a combination that cannot run).
    status = "invalid" if isinstance(err, InvalidCombination) else "failed"
    failure = {"status": status, "error": f"{type(err).__name__}: {err}", "overrides": overrides, **slurm.job_record()}
    previous = run_dir / "summary.json"
    if previous.is_file() and '"status": "ok"' in previous.read_text():
        run_dir.joinpath("failure.json").write_text(json.dumps(failure, indent=1))
    else:
        LocalLogger(run_dir).summary(failure)


if __name__ == "__main__":
    sys.argv[1:] = force_rasterizer_switches(overrides.quote_paths(sys.argv[1:]))
    try:  # Hydra's own composition errors are many lines, exit 1: composed here first, one line, exit 2
        overrides.check(sys.argv[1:])
    except ConfigError as error:
        fail(Path.cwd(), error, sweep=False, started=False)
    main()
