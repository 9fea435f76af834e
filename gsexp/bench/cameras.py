"""Cameras for benchmarks and checks: orbits around a scene's core, a scene's test views, and
one view framing the core (the GPU tests' biker camera)."""
from __future__ import annotations

import math

import numpy as np
import torch

from gsexp.scene import Camera, load_scene, look_at

AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}


def parse_up(text: str) -> torch.Tensor:
    """'z', '-y', '+x' or 'x,y,z'."""
    sign, axis = (-1.0, text[1:]) if text.startswith("-") else (1.0, text.lstrip("+"))
    if axis in AXES:
        return sign * torch.tensor(AXES[axis], dtype=torch.float64)
    try:
        vec = torch.tensor([float(v) for v in text.split(",")], dtype=torch.float64)
    except ValueError:
        vec = torch.zeros(0)
    if vec.shape != (3,) or vec.norm() == 0:
        raise ValueError(f"expected an axis (x, -y, +z) or three numbers, got {text!r}")
    return vec / vec.norm()


def orbit_cameras(means: torch.Tensor, n: int, width: int, height: int, *, up: torch.Tensor,
                  fov_deg: float = 50.0, elevation_deg: float = 20.0, coverage: float = 90.0):
    """n cameras on a circle around the median centre, looking at it, far enough that a sphere
    holding `coverage` % of the centres fits the narrower field of view. Median and percentile
    rather than the bounding box: stray far-away Gaussians would shrink the scene to a dot.
    Returns (cameras, info)."""
    pts = means.detach().double().cpu().numpy()
    centre = torch.from_numpy(np.median(pts, axis=0))
    radius = float(np.percentile(np.linalg.norm(pts - centre.numpy(), axis=1), coverage)) or 1.0
    half_fov = math.radians(fov_deg) / 2
    focal = 0.5 * min(width, height) / math.tan(half_fov)
    distance = radius / math.sin(half_fov)
    # Two directions spanning the plane perpendicular to `up`.
    helper = torch.eye(3, dtype=torch.float64)[up.abs().argmin()]
    a = torch.linalg.cross(up, helper)
    a = a / a.norm()
    b = torch.linalg.cross(up, a)
    elev = math.radians(elevation_deg)
    cameras = []
    for i in range(n):
        theta = 2 * math.pi * i / n
        direction = math.cos(elev) * (math.cos(theta) * a + math.sin(theta) * b) + math.sin(elev) * up
        eye = centre + distance * direction
        cameras.append(Camera(look_at(eye.tolist(), centre.tolist(), up.tolist()), focal, focal,
                              width / 2, height / 2, width, height, name=f"orbit_{i:02d}"))
    info = {"centre": centre.tolist(), "radius": radius, "distance": distance, "fov_deg": fov_deg,
            "elevation_deg": elevation_deg, "up": up.tolist()}
    return cameras, info


def eval_cameras(kind: str, path, count: int = 0, scale: float = 1.0):
    """A scene's test cameras: `count` evenly spaced ones (0: all), resized by `scale`.
    Returns (cameras, background, info)."""
    scene = load_scene(kind, path)
    cameras = scene.test_cameras
    if count and len(cameras) > count:
        picks = np.linspace(0, len(cameras) - 1, count).round().astype(int)
        cameras = [cameras[i] for i in picks]
    cameras = [c.scaled(scale) for c in cameras] if scale != 1.0 else cameras
    return cameras, tuple(scene.background), {"data_kind": kind, "data_path": str(path), "scale": scale}



def core_camera(g, width: int, height: int, view_dir=(0.3, 0.2, 1.0)) -> Camera:
    """A camera framing the central 96 % of the Gaussians (trained scenes have far outliers)."""
    from gsexp.scene.camera import framing_camera

    means = g.means.detach().float().cpu()
    lo, hi = torch.quantile(means, 0.02, dim=0), torch.quantile(means, 0.98, dim=0)
    core = means[((means >= lo) & (means <= hi)).all(1)]
    return framing_camera(core, width, height, view_dir=view_dir)
