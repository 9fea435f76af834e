"""LightGaussian's global significance: how much each Gaussian is seen in the training views.

    score_j = opacity_j * sum over views and pixels of hit_j(p) * (V_j / V_90)^beta

hit_j(p) = 1 where Gaussian j contributes to pixel p (alpha >= 1/255 before the pixel's
transmittance ran out), V_j the product of its scales, V_90 the volume that 90% of the
Gaussians exceed. Hits are counted by the backend's hit_counts (gsexp.render): the same
(pair, pixel) set each blend composites.
"""
from __future__ import annotations

import torch

from gsexp.render import hit_counts as backend_hit_counts
from gsexp.render.settings import make_settings


@torch.no_grad()
def hit_counts(gaussians, camera, settings=None) -> torch.Tensor:
    """[N] number of pixels of `camera` each Gaussian contributes to, on the settings' backend
    (default: the CUDA vanilla blend when the Gaussians are on a GPU, else the reference)."""
    if settings is None:
        settings = make_settings("vanilla" if gaussians.means.device.type == "cuda" else "torch")
    return backend_hit_counts(gaussians, camera, settings)


@torch.no_grad()
def significance(gaussians, cameras, beta: float = 0.1) -> torch.Tensor:
    """[N] global significance over `cameras` (the training views)."""
    hits = torch.zeros(len(gaussians), dtype=torch.float64, device=gaussians.means.device)
    for cam in cameras:
        hits += hit_counts(gaussians, cam)
    volume = gaussians.log_scales.detach().double().sum(-1).exp()
    v90 = torch.quantile(volume, 0.1) if len(volume) else volume.new_ones(())
    return hits * gaussians.opacities.detach().double() * (volume / v90).pow(beta)
