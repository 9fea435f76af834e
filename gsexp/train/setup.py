"""The recipe's setup steps, each a small function (as torchtune's `_setup_*`): device, data,
model and optimizers, strategy and compression, and resuming from a checkpoint."""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from gsexp.compress import make_compression
from gsexp.config import rasterizer_settings
from gsexp.gaussians import Gaussians, load_ply, make_params
from gsexp.render.settings import RasterSettings
from gsexp.scene import load_scene
from gsexp.scene.masks import load_masks
from gsexp.train.appearance import make_appearance
from gsexp.train.checkpoint import latest_checkpoint, load_checkpoint, rng_state, set_rng_state
from gsexp.train.filter3d import Filter3D
from gsexp.train.pairs import PairBudget
from gsexp.train.params import make_optimizers, scale_for_batch
from gsexp.train.pose import PoseCorrection
from gsexp.train.resolution import make_schedule
from gsexp.train.strategy import make_strategy

log = logging.getLogger("gsexp.train")


@dataclass
class Run:
    """Everything the loop reads and updates. `params` and `optimizers` may be replaced by
    densification, so the loop re-reads them every step."""
    cfg: DictConfig
    settings: RasterSettings
    device: torch.device
    scene: object
    images: list
    params: dict
    optimizers: dict
    compression: object
    strategy: object
    state: dict
    start: int = 0
    order: list = field(default_factory=list)  # training views left in this pass
    means_lr_hold: int = 0  # schedule.hold_means_lr: the step the means' learning rate starts to decay
    pairs: PairBudget = field(default_factory=lambda: PairBudget(False))
    last_shape: tuple = ()  # (Gaussians, image width) at the last render
    resolution: object = None  # the schedule.resolution schedule (gsexp/train/resolution.py), or None
    masks: list | None = None  # data.masks: a [1, H, W] mask per training view, or None
    appearance: object = None  # appearance=affine|bilateral_grid: the per-photo colour transforms, or None
    pose: object = None  # pose_opt: the training cameras' pose corrections, or None
    filter3d: object = None  # model.filter_3d: Mip-Splatting's 3D filter (gsexp/train/filter3d.py), or None
    elapsed: float = 0.0  # training seconds of earlier attempts, up to their last checkpoint
    attempts: int = 1
    setup_s: dict = field(default_factory=dict)  # where setup's seconds went (summary.json's overhead_s)

    def per_view(self) -> dict:
        """What the training views own beside the model (gsexp/train/per_view.py), by checkpoint key."""
        return {k: v for k, v in (("appearance", self.appearance), ("pose", self.pose)) if v is not None}


def gaussians(run: Run):
    """The model to render: the parameters, through compression's view and model.filter_3d."""
    g = run.compression.gaussians(run.params, run.cfg.model.sh_degree)
    return g if run.filter3d is None else run.filter3d.apply(g)


@dataclass
class Inputs:
    """What a run reads from the user's files: loaded, and so checked, before the run folder
    gets anything or a logger starts (a bad file leaves nothing behind)."""
    scene: object
    initial: Gaussians  # the model before training (replaced by the checkpoint's when resuming)
    checkpoint: tuple | None  # (path, its contents) to resume from: resume_checkpoint's
    rng: dict  # the RNG state after loading: what a logger's start does in between does not count


def load_inputs(cfg: DictConfig, checkpoint: tuple | None) -> Inputs:
    """The PLY to start from, then the scene: a bad PLY fails in a second, not after a large
    scene's minute of loading."""
    seed_everything(cfg.seed)
    ply = load_ply(cfg.model.ply) if cfg.model.init == "ply" else None
    scene = load_data(cfg)
    return Inputs(scene, initial_gaussians(cfg, scene, ply), checkpoint, rng_state())


def setup(cfg: DictConfig, run_dir: Path, inputs: Inputs | None = None) -> Run:
    clock = _Clock()
    settings = rasterizer_settings(cfg)
    device = pick_device(cfg.device, settings)
    if device.type == "cuda":  # the context now, and the extension before the training clock starts
        torch.zeros(1, device=device)
        clock.mark("cuda_init")
        if settings.backend == "cuda" or cfg.fused_ssim or cfg.fused_adam:
            from gsexp.render.cuda.build import CudaUnavailable, load

            try:
                load()
            except CudaUnavailable:
                if settings.backend == "cuda":
                    raise
            clock.mark("extension")  # a cached build: its check and load
    inputs = inputs or load_inputs(cfg, resume_checkpoint(cfg, run_dir))
    set_rng_state(inputs.rng)
    scene = inputs.scene
    params = {k: torch.nn.Parameter(v.to(device)) for k, v in make_params(inputs.initial).items()}
    optimizers = make_optimizers(params, scene.extent, torch_adam=not cfg.fused_adam)
    clock.mark("model")
    compression = make_compression(cfg.compress.name, **OmegaConf.to_container(cfg.compress.options, resolve=True)
                                   ).scaled(cfg.iterations)
    compression.setup(params, optimizers)  # e.g. the mask's own parameters
    strategy = make_strategy(cfg.strategy.name, scene_extent=scene.extent,
                             white_background=all(c >= 1.0 for c in scene.background),
                             training_pixels=sum(c.width * c.height for c in scene.train_cameras),
                             **OmegaConf.to_container(cfg.strategy.options, resolve=True)
                             ).scaled(cfg.iterations, batch_size=cfg.batch_size)
    if getattr(strategy, "wants_absgrad", False):  # AbsGS's statistic comes from the rasterizer's backward
        settings = settings.replace(absgrad=True)
    images = [im.to(device) for im in scene.train_images]
    clock.mark("images")
    run = Run(cfg, settings, device, scene, images, params, optimizers,
              compression, strategy, strategy.initial_state())
    run.pairs = PairBudget(cfg.pair_capacity and settings.backend == "cuda")
    run.masks = [m.to(device) for m in scene.train_masks] if scene.train_masks else None
    run.appearance = make_appearance(cfg, len(scene.train_cameras), device)
    if cfg.model.filter_3d:
        run.filter3d = Filter3D(scene.train_cameras, device, cfg.model.filter_3d_size)
        if hasattr(strategy, "opacity_factor"):  # resets bound the filtered opacity (Mip-Splatting)
            strategy.opacity_factor = lambda p: run.filter3d.opacity_factor(p["means"], p["log_scales"])
    if cfg.pose_opt:
        run.pose = PoseCorrection(scene.train_cameras, device, lr=cfg.pose_opt_lr, reg=cfg.pose_opt_reg)
    if cfg.batch_size > len(scene.train_cameras):
        raise ValueError(f"config key 'batch_size': {cfg.batch_size} views a step, but the scene has "
                         f"{len(scene.train_cameras)} training views; use batch_size <= {len(scene.train_cameras)}")
    for opt in [*optimizers.values(), *(extra.optimizer for extra in run.per_view().values())]:
        scale_for_batch(opt, cfg.batch_size)
    schedule_resolution(run, cfg)
    if hasattr(strategy, "view_scorer"):  # strategy=fastgs: its multi-view scores render training views
        from gsexp.train.view_scores import ViewScorer

        strategy.view_scorer = ViewScorer(run)
    clock.mark("rest")
    resume(run, run_dir, inputs.checkpoint)
    clock.mark("resume")
    inputs.checkpoint = inputs.initial = None  # on the device now: no second copy held through training
    run.setup_s = clock.parts
    return run


class _Clock:
    """Seconds between marks, by name (a CUDA mark waits for nothing: the copies it follows
    are synchronous from pageable memory)."""

    def __init__(self):
        self.parts, self.last = {}, time.perf_counter()

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.parts[name] = self.parts.get(name, 0.0) + now - self.last
        self.last = now


def schedule_resolution(run: Run, cfg: DictConfig) -> None:
    """schedule.resolution: its levels, the budget strategy following them, the means' learning
    rate held while the images are small (DashGaussian)."""
    run.resolution = make_schedule(cfg, run.scene.train_images)
    if run.resolution is None:
        return
    if hasattr(run.strategy, "downscale_at"):
        run.strategy.downscale_at = run.resolution.downscale
    if cfg.schedule.hold_means_lr:
        run.means_lr_hold = run.resolution.first_step_finer_than(2)
    held = f"; the means' learning rate held until step {run.means_lr_hold}" if run.means_lr_hold else ""
    log.info(f"schedule.resolution={cfg.schedule.resolution}: {run.resolution.describe()}{held}")


def resume_run(run_dir: Path, overrides: list[str] = ()) -> Run:
    """A finished or running run set up again from its config and newest checkpoint (as
    resume=auto), with `overrides` (KEY=VALUE, typed as on the command line): for tools that
    train on from a run, e.g. past densification where the model size is fixed."""
    config = Path(run_dir) / ".hydra" / "config.yaml"
    if not config.is_file():
        raise FileNotFoundError(f"{run_dir}: not a run directory (no .hydra/config.yaml)")
    cfg = OmegaConf.load(config)
    cfg.resume = "auto"
    return setup(OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides))), Path(run_dir))


def pick_device(name: str, settings: RasterSettings | None = None) -> torch.device:
    """The device `name` (auto: a GPU when there is one); settings: the rasterizer it must run."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("config key 'device': cuda requested but no CUDA device is available; use device=cpu")
    if settings is not None and settings.backend == "cuda" and name != "cuda":
        raise ValueError(f"config key 'rasterizer': rasterizer={settings.name} needs a GPU and the run is on "
                         f"{name}; use rasterizer=torch on the CPU")
    return torch.device(name)


def seed_everything(seed: int):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def load_data(cfg: DictConfig, only: str | None = None):
    """The scene of cfg.data; only="train" | "test" reads that split's images alone."""
    d = cfg.data
    options = dict(d.options)
    if d.kind in ("blender", "transforms", "synthetic"):
        options["background"] = tuple(d.background)
    if d.kind in ("transforms", "llff", "colmap", "synthetic"):
        options["test_every"] = d.test_every
    if d.kind != "synthetic":
        options["downscale"] = d.downscale
    scene = load_scene(d.kind, d.path, only=only, **options)
    if d.masks and only != "test":
        scene.train_masks = load_masks(d.masks, scene)
    return scene


def initial_gaussians(cfg: DictConfig, scene, ply: Gaussians | None = None) -> Gaussians:
    m = cfg.model
    if m.init == "ply":  # fine-tuning: any INRIA or compressed PLY (`ply`), at the run's SH degree
        return ply.with_sh_degree(m.sh_degree)
    use_points = scene.points is not None and len(scene.points) > 0 and m.init != "random"
    if m.init == "points" and not use_points:
        raise ValueError("config key 'model.init': 'points' but the scene has no SfM points; use init=random")
    if use_points:
        return Gaussians.from_points(scene.points, scene.point_colors, sh_degree=m.sh_degree,
                                     opacity=m.init_opacity)
    radius = m.random_radius or scene.meta.get("random_radius") or 0.3 * scene.extent
    gen = torch.Generator().manual_seed(cfg.seed)
    # Centred on the world origin, as 3DGS does for scenes without points (Blender scenes are).
    return Gaussians.random(m.num_random, (0.0, 0.0, 0.0), radius, sh_degree=m.sh_degree,
                            opacity=m.init_opacity, generator=gen)


def resume(run: Run, run_dir: Path, checkpoint: tuple | None) -> None:
    """Continue from `checkpoint` (resume_checkpoint's), and say which; or say it starts fresh."""
    if checkpoint is not None:
        path, ckpt = checkpoint
        restore(ckpt, run)
        run.elapsed, run.attempts = float(ckpt.get("train_seconds", 0.0)), int(ckpt.get("attempts", 1)) + 1
        log.info(f"resumed from step {run.start} ({path}), attempt {run.attempts}")
    else:
        log.info(f"starting fresh in {run_dir}" + (" (resume=auto: no checkpoint yet)" if run.cfg.resume else ""))


def resume_checkpoint(cfg: DictConfig, run_dir: Path) -> tuple | None:
    """(path, contents) of the checkpoint `cfg.resume` names (auto: the run's newest, if any),
    refused when it holds more steps than `iterations` (the summary would contradict the model)."""
    path = resolve_resume(cfg.resume, run_dir)
    if path is None:
        if latest_checkpoint(run_dir) is not None:
            raise ValueError(f"{run_dir} already holds checkpoints of an earlier run; pass resume=auto to "
                             "continue it (iterations=<more> extends a finished run), or name a new run (name=...)")
        return None
    ckpt = load_checkpoint(path)
    if ckpt["step"] > cfg.iterations:
        raise ValueError(f"config key 'iterations': {cfg.iterations} is fewer than the {ckpt['step']} steps "
                         f"{path} holds; pass iterations={ckpt['step']} or more to resume it, or name a new "
                         "run (name=...)")
    made_with = ckpt.get("config", {}).get("batch_size", 1)
    if made_with != cfg.batch_size:  # its Adam state holds the rates and betas scaled for that batch
        raise ValueError(f"config key 'batch_size': {path} was trained with batch_size={made_with}; resume it "
                         f"with batch_size={made_with}, or start a new run (name=...)")
    return path, ckpt


def resolve_resume(resume, run_dir: Path):
    if resume in (None, "", "null"):
        return None
    if resume == "auto":
        return latest_checkpoint(run_dir)  # none yet: start fresh
    path = Path(resume)
    if not path.is_file():
        raise FileNotFoundError(f"config key 'resume': checkpoint {path} not found; use resume=auto or a .pt path")
    return path


def restore(ckpt: dict, run: Run) -> None:
    for name, value in ckpt["params"].items():
        run.params[name] = torch.nn.Parameter(value.to(run.device))
        run.optimizers[name].param_groups[0]["params"] = [run.params[name]]
        run.optimizers[name].state.clear()
        run.optimizers[name].load_state_dict(ckpt["optimizers"][name])
    set_rng_state(ckpt["rng"])
    run.state = {k: (v.to(run.device) if torch.is_tensor(v) else v) for k, v in ckpt["strategy"].items()}
    run.start, run.order = ckpt["step"], ckpt["order"].tolist()
    for name, extra in run.per_view().items():  # their parameters and Adam state
        if name in ckpt:
            extra.load_state_dict(ckpt[name])


def payload(run: Run, step: int, train_seconds: float) -> dict:
    """Everything a resumed run needs to continue exactly: the views left in this pass too, and
    the training time and attempts so far (the summary covers the run, not one attempt)."""
    return {"step": step, "order": torch.tensor(run.order, dtype=torch.long),
            "train_seconds": train_seconds, "attempts": run.attempts,
            "params": {k: v.detach().cpu() for k, v in run.params.items()},
            "optimizers": {k: o.state_dict() for k, o in run.optimizers.items()},
            "strategy": run.state, "rng": rng_state(), "config": OmegaConf.to_container(run.cfg, resolve=True),
            **{name: extra.state_dict() for name, extra in run.per_view().items()},
            **({"filter_3d": filter_std(run)} if run.filter3d is not None else {})}


def filter_std(run: Run) -> torch.Tensor:
    """model.filter_3d's filter for the current parameters (readers of the checkpoint apply it)."""
    run.filter3d.refresh(run.params["means"])  # densification may have changed the count since
    return run.filter3d.std.detach().cpu()
