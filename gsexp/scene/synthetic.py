"""A procedural ground-truth scene: Gaussians on a sphere and a ring around it, rendered by
the reference rasterizer from a ring of cameras. The embedded default for `train.py`:
needs no files, so the first command works on a fresh machine."""
from __future__ import annotations

import math

import torch

from gsexp.gaussians import Gaussians, rgb_to_sh, sh_to_rgb
from gsexp.render import render
from gsexp.scene.camera import Camera, Scene, look_at


def ground_truth(num_gaussians: int = 3000, seed: int = 0) -> Gaussians:
    gen = torch.Generator().manual_seed(seed)
    n_sphere = num_gaussians * 2 // 3
    n_ring = num_gaussians - n_sphere
    d = torch.nn.functional.normalize(torch.randn(n_sphere, 3, generator=gen), dim=1)
    sphere = 0.6 * d
    t = torch.rand(n_ring, generator=gen) * 2 * math.pi
    s = torch.rand(n_ring, generator=gen) * 2 * math.pi
    ring = torch.stack([(1.0 + 0.12 * s.cos()) * t.cos(), (1.0 + 0.12 * s.cos()) * t.sin(),
                        0.12 * s.sin()], 1)
    means = torch.cat([sphere, ring])
    # Colour: smooth stripes over the sphere, a hue wheel around the ring.
    stripes = 0.5 + 0.5 * torch.stack([torch.sin(6 * d[:, 2]), torch.cos(4 * d[:, 0]), d[:, 1]], 1)
    wheel = 0.5 + 0.45 * torch.stack([t.cos(), (t + 2.1).cos(), (t + 4.2).cos()], 1)
    colors = torch.cat([stripes, wheel]).clamp(0.02, 0.98)
    sh = torch.zeros(num_gaussians, 4, 3)
    sh[:, 0] = rgb_to_sh(colors)
    sh[:, 1:] = 0.05 * torch.randn(num_gaussians, 3, 3, generator=gen)  # mild view dependence
    log_scales = math.log(0.045) + 0.3 * torch.randn(num_gaussians, 3, generator=gen)
    quats = torch.nn.functional.normalize(torch.randn(num_gaussians, 4, generator=gen), dim=1)
    return Gaussians(means, log_scales, quats, torch.full((num_gaussians,), 3.0), sh, sh_degree=1)


def ring_cameras(num_views: int, width: int, height: int, radius: float = 3.2) -> list[Camera]:
    cams = []
    for i in range(num_views):
        angle = 2 * math.pi * i / num_views
        eye = (radius * math.cos(angle), radius * math.sin(angle), 1.2 * math.sin(3 * angle) + 0.6)
        focal = 1.3 * width
        cams.append(Camera(look_at(eye, (0, 0, 0)), focal, focal, width / 2, height / 2, width, height,
                           name=f"view_{i:03d}"))
    return cams


def load_synthetic(path=None, *, num_gaussians: int = 3000, num_views: int = 32, width: int = 64,
                   height: int = 64, test_every: int = 8, seed: int = 0,
                   background=(0.0, 0.0, 0.0), num_points: int = 1000) -> Scene:
    """Render the procedural scene. `path` is accepted for a uniform interface and unused.

    `num_points` noisy samples of the ground-truth centres play the SfM points (0: none,
    so training starts from a random init)."""
    if num_views < 2 or width < 8 or height < 8 or num_gaussians < 1:
        raise ValueError("load_synthetic: need num_views >= 2, width/height >= 8, num_gaussians >= 1")
    gt = ground_truth(num_gaussians, seed)
    cams = ring_cameras(num_views, width, height)
    with torch.no_grad():
        images = [render(gt, c, background=background).image for c in cams]
    test = [i for i in range(num_views) if test_every and i % test_every == 0]
    train = [i for i in range(num_views) if i not in test]
    points = colors = None
    if num_points:
        gen = torch.Generator().manual_seed(seed + 1)
        idx = torch.randperm(num_gaussians, generator=gen)[:num_points]
        points = gt.means[idx] + 0.02 * torch.randn(len(idx), 3, generator=gen)
        colors = sh_to_rgb(gt.sh[idx, 0]).clamp(0, 1)
    return Scene([cams[i] for i in train], [images[i] for i in train],
                 [cams[i] for i in test], [images[i] for i in test],
                 points=points, point_colors=colors, background=tuple(background), name="synthetic",
                 meta={"ground_truth": gt})
