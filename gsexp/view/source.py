"""What the viewer and the video show: a model (run dir, .pt, .ply, .splat) and, when the run's
config is beside it, its scene's cameras and background. Loading is gsexp.eval's and
gsexp.export's, reused."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from gsexp.gaussians import Gaussians
from gsexp.scene import Camera


@dataclass
class Source:
    gaussians: Gaussians
    name: str                                         # what the page and the video say they show
    train_cameras: list[Camera] = field(default_factory=list)
    test_cameras: list[Camera] = field(default_factory=list)
    background: tuple = (0.0, 0.0, 0.0)
    rasterizer: dict | None = None                    # the run's settings node (_target_ + switches)
    scene: str = ""                                   # data kind and folder, when known


def scene_label(data) -> str:
    """'blender lego' from a data config node."""
    path = data.get("path")
    return f"{data.kind} {Path(path).name}" if path else str(data.kind)


def load_source(path, *, with_scene: bool = True) -> Source:
    """The model at `path` and, when its run config is found and with_scene, its scene's cameras.
    A scene that cannot be loaded (moved data) leaves the model alone, with a warning."""
    from omegaconf import OmegaConf

    from gsexp.eval import find_run_config
    from gsexp.export import load_model

    path = Path(path)
    g = load_model(path)
    source = Source(g, name=path.resolve().name)
    run = find_run_config(path)
    if run is None:
        return source
    if "rasterizer" in run:
        source.rasterizer = OmegaConf.to_container(run.rasterizer, resolve=True)
    if with_scene and "data" in run:
        source.scene = scene_label(run.data)
        try:
            scene = scene_of(run)
        except (OSError, ValueError) as err:  # the data moved: still show the model
            warnings.warn(f"{path}: its scene ({source.scene}) cannot be loaded ({err}); no cameras shown")
            return source
        source.train_cameras, source.test_cameras = scene.train_cameras, scene.test_cameras
        source.background = tuple(scene.background)
    return source


def scene_of(run_cfg):
    """The scene a run trained on, from its .hydra/config.yaml (validated as the trainer does)."""
    from omegaconf import OmegaConf

    from gsexp.config import validate
    from gsexp.train.setup import load_data

    cfg = validate(OmegaConf.create({"data": run_cfg.data}))
    return load_data(cfg)

