"""Cameras, scenes and the loaders that build them from datasets on disk."""
from __future__ import annotations

from pathlib import Path

from gsexp.scene.camera import Camera, Scene, camera_extent, framing_camera, look_at

KINDS = ("blender", "transforms", "llff", "colmap", "synthetic")

__all__ = ["Camera", "Scene", "look_at", "framing_camera", "camera_extent", "load_scene", "KINDS"]


def load_scene(kind: str, path=None, *, only: str | None = None, **options) -> Scene:
    """Load a scene of `kind` (one of KINDS) from `path`; options go to that kind's loader.
    only="train" | "test" reads that split's images alone (the other split comes back empty);
    the synthetic scene, rendered rather than read, always has both."""
    kind = str(kind).lower()
    if kind not in KINDS:
        raise ValueError(f"unknown scene kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if kind == "synthetic":  # generated in memory, path optional
        from gsexp.scene.synthetic import load_synthetic
        return load_synthetic(path, **options)
    if path is None:
        raise ValueError(f"load_scene({kind!r}) needs the path of the scene folder")
    if not Path(path).exists():
        raise FileNotFoundError(f"scene path {path} does not exist (kind={kind}); check the data path")
    # Imported lazily so e.g. pycolmap is only needed by the loaders that use it.
    if kind == "blender":
        from gsexp.scene.blender import load_blender as loader
    elif kind == "transforms":
        from gsexp.scene.transforms import load_transforms as loader
    elif kind == "llff":
        from gsexp.scene.llff import load_llff as loader
    else:
        from gsexp.scene.colmap import load_colmap as loader
    return loader(path, only=only, **options)
