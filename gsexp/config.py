"""The training config's schema and its checks: an unknown key, a misspelled option or an
impossible value fails before any work, naming the key."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gsexp.errors import ConfigError, InvalidCombination
from gsexp.render import settings as raster_settings
from gsexp.schedule import sh_interval_steps

DATA_KINDS = ("blender", "transforms", "llff", "colmap", "synthetic")
STRATEGIES = ("default", "budget", "fastgs", "mcmc", "none")
COMPRESSIONS = ("none", "prune", "vq", "prune_vq", "mask")
APPEARANCES = ("none", "affine", "bilateral_grid")  # gsexp/train/appearance.py
LOGGERS = ("wandb", "none")
BACKGROUNDS = {"white": [1.0, 1.0, 1.0], "black": [0.0, 0.0, 0.0]}  # data.background=white


@dataclass
class DataConfig:
    kind: str = "synthetic"
    path: Optional[str] = None
    downscale: int = 1
    background: list = field(default_factory=lambda: [0.0, 0.0, 0.0])
    test_every: int = 8
    densify_grad_threshold: float = 0.0002  # the default strategy's grad_threshold for this data
    undistort: bool = True  # colmap: undistort distorted cameras (false: ignore the distortion)
    masks: Optional[str] = None  # a folder of training masks named as the images, white = use
    options: dict = field(default_factory=dict)


@dataclass
class ModelConfig:
    sh_degree: int = 3
    init: str = "auto"        # auto | points | random | ply (model.ply: start from that model)
    ply: Optional[str] = None
    num_random: int = 20000
    random_radius: Optional[float] = None
    init_opacity: float = 0.1
    filter_3d: bool = False   # Mip-Splatting's 3D smoothing filter (gsexp/train/filter3d.py)
    filter_3d_size: float = 0.2  # its variance in pixels^2 at a Gaussian's finest training sampling rate


@dataclass
class StrategyConfig:
    name: str = "default"
    options: dict = field(default_factory=dict)


@dataclass
class CompressConfig:
    name: str = "none"
    options: dict = field(default_factory=dict)


@dataclass
class AppearanceConfig:
    name: str = "none"  # none | affine | bilateral_grid (gsexp/train/appearance.py)
    lr: float = 1e-3
    reg: float = 0.01
    grid_x: int = 16  # bilateral_grid's cells across, down, and over luma
    grid_y: int = 16
    grid_luma: int = 8


@dataclass
class LoggerConfig:
    kind: str = "wandb"
    project: str = "gsexp"
    mode: str = "offline"


@dataclass
class PathsConfig:
    root: str = "outputs"


@dataclass
class ViewerConfig:
    enabled: bool = False     # serve the model and its curves while it trains (gsexp/view/live.py)
    host: str = "127.0.0.1"   # 0.0.0.0: reachable from other machines
    port: int = 8080          # the next free one when taken; 0: any free one
    every_s: float = 0.5      # with a browser connected: send the model at most this often


@dataclass
class ScheduleConfig:
    resolution: str = "none"    # none | auto (from the images' spectra) | manual (downscales, steps)
    max_downscale: float = 4.0  # auto: the first, coarsest level's image-size divisor
    full_at: float = 0.5        # auto: full resolution from this fraction of iterations on
    downscales: list = field(default_factory=list)  # manual: e.g. [4, 2, 1]
    steps: list = field(default_factory=list)       # manual: their start steps in a 30k run, e.g. [0, 3000, 8000]
    hold_means_lr: bool = True  # with a resolution: the means' rate decays from the first step under 1/2 size


@dataclass
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    # A variant's settings (gsexp/render/settings.py): its `_target_` and only its own switches.
    rasterizer: Any = field(default_factory=lambda: {"_target_": "gsexp.render.settings.TorchSettings"})
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    compress: CompressConfig = field(default_factory=CompressConfig)
    appearance: AppearanceConfig = field(default_factory=AppearanceConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    viewer: ViewerConfig = field(default_factory=ViewerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    name: Optional[str] = None
    iterations: int = 3000
    seed: int = 0
    resume: Optional[str] = None
    eval_every: int = 1000
    checkpoint_every: int = 1000
    log_every: int = 10
    device: str = "auto"
    random_background: bool = False
    sh_degree_interval: int = 1000
    ssim_lambda: float = 0.2
    sparse_adam: bool = False  # Adam moves only the Gaussians the view saw (a quality trade)
    batch_size: int = 1        # training views per step (gsexp/train/recipe.py)
    pose_opt: bool = False     # a pose correction per training camera (gsexp/train/pose.py)
    pose_opt_lr: float = 1e-5
    pose_opt_reg: float = 1e-6
    fused_ssim: bool = True    # on a GPU: the loss in csrc/ssim.cu instead of torch L1 + gsexp.metrics.ssim
    fused_adam: bool = True    # on a GPU: one launch for every parameter instead of torch's Adam per tensor
    pair_capacity: bool = False  # CUDA: size pair buffers from recent counts instead of a host sync per step
    eval_lpips: Any = "auto"
    lpips_net: str = "vgg"


def check_machine(cfg: DictConfig) -> None:
    """What the config asks of this machine (a GPU), checked before any work."""
    import torch

    raster = rasterizer_settings(cfg)
    wants = f"rasterizer={raster.name}" if raster.backend == "cuda" else "device=cuda" if cfg.device == "cuda" else None
    if wants and not torch.cuda.is_available():
        key = "rasterizer" if raster.backend == "cuda" else "device"
        raise ConfigError(f"config key '{key}': {wants} needs a CUDA GPU and this machine has none; "
                          "use rasterizer=torch (device=auto or cpu)", key=key)


def force_rasterizer_switches(overrides: list[str]) -> list[str]:
    """`rasterizer.<switch>=v` -> `++rasterizer.<switch>=v`. Each variant's file lists only its
    own switches, so Hydra would refuse one the variant lacks before validation could name the
    variants that have it (and, in a sweep, list that job as invalid)."""
    return [f"++{o}" if o.startswith("rasterizer.") and "=" in o else o for o in overrides]


def rasterizer_settings(cfg: DictConfig, sweep: bool = False) -> raster_settings.RasterSettings:
    """The run's rasterizer settings, built from cfg.rasterizer (errors name the key).
    sweep: a job of a multirun (see settings.from_config)."""
    try:
        return raster_settings.from_config(OmegaConf.to_container(cfg.rasterizer, resolve=True), sweep)
    except ConfigError as err:
        key = f"rasterizer.{err.key}".rstrip(".")
        raise type(err)(f"config key '{key}': {err.problem}", key=key) from None


def named_background(cfg: DictConfig) -> DictConfig:
    """data.background=white (or black) as the [r, g, b] list the schema holds."""
    name = OmegaConf.select(cfg, "data.background")
    if not isinstance(name, str):
        return cfg
    if name.lower() not in BACKGROUNDS:
        raise ConfigError(f"config key 'data.background': {name!r} is not a colour; use white, black or three "
                          "values in [0, 1], e.g. data.background=[1,1,1]", key="data.background")
    return OmegaConf.merge(cfg, {"data": {"background": BACKGROUNDS[name.lower()]}})


def check_schedule(sc, need) -> None:
    from gsexp.train.resolution import MODES

    need(sc.resolution in MODES, "schedule.resolution", f"{sc.resolution!r} is not one of {', '.join(MODES)}")
    if sc.resolution == "auto":
        need(sc.max_downscale >= 1, "schedule.max_downscale", f"must be >= 1 (an image-size divisor), got {sc.max_downscale}")
        need(0 < sc.full_at <= 1, "schedule.full_at", f"must be in (0, 1] (a fraction of iterations), got {sc.full_at}")
    if sc.resolution == "manual":
        d, s = list(sc.downscales), list(sc.steps)
        example = "e.g. schedule.downscales=[4,2,1] schedule.steps=[0,3000,8000]"
        need(len(d) == len(s) > 0, "schedule.downscales",
             f"manual needs downscales and steps of one length ({len(d)} and {len(s)} given), {example}")
        need(s[0] == 0 and s == sorted(s) and len(set(s)) == len(s), "schedule.steps",
             f"must start at 0 and rise, got {s}; {example}")
        need(all(x >= 1 for x in d) and d[-1] == 1, "schedule.downscales",
             f"divisors >= 1 that end at 1 (full resolution), got {d}; {example}")


def check_strategy(strategy, need) -> None:
    """Before a run folder exists: a misspelt or out-of-range strategy option stops here."""
    from gsexp.train.strategy import make_strategy

    need(strategy.name in STRATEGIES, "strategy.name", f"{strategy.name!r} is not one of {', '.join(STRATEGIES)}")
    try:
        make_strategy(strategy.name, **OmegaConf.to_container(strategy.options, resolve=True))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config key 'strategy.options': {err}") from None


def check_per_view(merged, need) -> None:
    """What the training views own beside the model: appearance, pose_opt."""
    need(merged.pose_opt_lr > 0 and merged.pose_opt_reg >= 0, "pose_opt_lr",
         f"pose_opt_lr must be > 0 and pose_opt_reg >= 0, got {merged.pose_opt_lr}, {merged.pose_opt_reg}")
    a = merged.appearance
    need(a.lr > 0 and a.reg >= 0, "appearance", f"lr must be > 0 and reg >= 0, got lr={a.lr}, reg={a.reg}")
    for key in ("grid_x", "grid_y", "grid_luma"):
        need(a[key] >= 1, f"appearance.{key}", f"must be >= 1, got {a[key]}")


def validate(cfg: DictConfig, sweep: bool = False) -> DictConfig:
    """Merge into the schema (unknown keys and wrong types fail here) and check values."""
    cfg = named_background(cfg)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(TrainConfig), cfg)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        raise ConfigError(f"config key '{key}': {str(err).splitlines()[0]}. "
                          "Check the spelling against conf/ and gsexp/config.py.") from None
    try:
        OmegaConf.to_container(merged, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as err:
        raise ConfigError(f"config key '{getattr(err, 'full_key', '?')}' has no value: set it on the "
                          "command line, e.g. data.path=/path/to/scene") from None

    def need(ok: bool, key: str, problem: str, error=ConfigError):
        if not ok:
            raise error(f"config key '{key}': {problem}")

    def choice(key: str, options):
        value = OmegaConf.select(merged, key)
        need(value in options, key, f"{value!r} is not one of {', '.join(map(str, options))}")

    need(merged.iterations > 0, "iterations", f"must be > 0, got {merged.iterations}")
    for key in ("eval_every", "checkpoint_every", "log_every", "sh_degree_interval"):
        need(merged[key] >= 0, key, f"must be >= 0, got {merged[key]}")
    need(0 <= merged.ssim_lambda <= 1, "ssim_lambda", f"must be in [0, 1], got {merged.ssim_lambda}")
    need(merged.batch_size >= 1, "batch_size", f"must be an integer >= 1, got {merged.batch_size}")
    need(0 <= merged.model.sh_degree <= 3, "model.sh_degree", f"must be 0..3, got {merged.model.sh_degree}")
    need(merged.model.num_random > 0, "model.num_random", "must be > 0")
    need(0 < merged.model.init_opacity < 1, "model.init_opacity", "must be in (0, 1)")
    need(merged.model.filter_3d_size > 0, "model.filter_3d_size", f"must be > 0, got {merged.model.filter_3d_size}")
    need(not merged.model.filter_3d or merged.compress.name == "none", "model.filter_3d",
         f"is not supported with compress={merged.compress.name} (the compressed file would hold the "
         "unfiltered model); use one or the other")
    need(merged.data.downscale >= 1, "data.downscale", f"must be an integer >= 1, got {merged.data.downscale}")
    need(len(merged.data.background) == 3, "data.background", "must be 3 values (r, g, b)")
    choice("data.kind", DATA_KINDS)
    need(merged.resume in (None, "", "auto") or Path(merged.resume).is_file(), "resume",
         f"{merged.resume} is not a file; use resume=auto (the run's newest checkpoint) or a checkpoint's path")
    choice("model.init", ("auto", "points", "random", "ply"))
    if merged.model.init == "ply":
        need(merged.model.ply is not None, "model.ply", "model.init=ply needs model.ply=<a .ply file>")
        need(Path(merged.model.ply).is_file(), "model.ply",
             f"{merged.model.ply} is not a file (relative paths are from {Path.cwd()})")
    raster = rasterizer_settings(merged, sweep)
    merged.rasterizer = {"_target_": merged.rasterizer._target_, **raster.switches()}  # as the run uses them
    need(raster.backend != "cuda" or merged.device != "cpu", "device",
         f"rasterizer={raster.name} runs on a GPU; set device=cuda (or auto), or use rasterizer=torch on the CPU")
    check_strategy(merged.strategy, need)
    check_schedule(merged.schedule, need)
    choice("appearance.name", APPEARANCES)
    check_per_view(merged, need)
    choice("compress.name", COMPRESSIONS)
    if merged.compress.name != "none":
        from gsexp.compress import make_compression

        try:
            compression = make_compression(merged.compress.name, **OmegaConf.to_container(merged.compress.options))
        except (TypeError, ValueError) as err:
            raise ConfigError(f"config key 'compress.options': {err}") from None
        vq_step = getattr(compression.scaled(merged.iterations), "vq_step", None)
        if vq_step is not None:  # a band that starts training after the VQ would stay frozen at its start
            every = sh_interval_steps(merged.sh_degree_interval, merged.batch_size)
            late = [k * every for k in range(1, merged.model.sh_degree + 1) if vq_step < k * every < merged.iterations]
            need(not late, "compress.options.vq_step",
                 f"quantises at step {vq_step} of {merged.iterations}, but SH band(s) start training at step(s) "
                 f"{late} (sh_degree_interval={merged.sh_degree_interval}); their codes would be untrained. "
                 "Quantise later, or lower sh_degree_interval")
    choice("logger.kind", LOGGERS)
    need(0 <= merged.viewer.port <= 65535, "viewer.port", f"must be 0..65535, got {merged.viewer.port}")
    need(merged.viewer.every_s >= 0, "viewer.every_s", f"must be >= 0, got {merged.viewer.every_s}")
    choice("device", ("cpu", "cuda", "auto"))
    choice("eval_lpips", ("auto", True, False))
    choice("lpips_net", ("vgg", "alex"))
    if merged.data.kind != "synthetic":
        need(merged.data.path is not None, "data.path", f"data={merged.data.kind} needs data.path=<scene folder>")
        need(Path(merged.data.path).exists(), "data.path",
             f"{merged.data.path} does not exist (relative paths are from {Path.cwd()})")
    return merged
