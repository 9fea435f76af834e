"""LightGaussian's global significance: how much each Gaussian is seen in the training views.

    score_j = opacity_j * sum over views and pixels of hit_j(p) * (V_j / V_90)^beta

hit_j(p) = 1 where Gaussian j contributes to pixel p (alpha >= 1/255 before the pixel's
transmittance ran out), V_j the product of its scales, V_90 the volume that 90% of the
Gaussians exceed. Hits are counted by the CUDA vanilla blend on a GPU, else taken from the
reference rasterizer's contributing entries: the same (pair, pixel) set each blend composites.
"""
from __future__ import annotations

import torch

from gsexp.render.reference import duplicate, make_formula, preprocess, sort_pairs
from gsexp.render.reference.blend import blend_forward


@torch.no_grad()
def hit_counts(gaussians, camera) -> torch.Tensor:
    """[N] number of pixels of `camera` each Gaussian contributes to: from the CUDA vanilla
    blend when the Gaussians are on a GPU, else from the reference."""
    if gaussians.means.device.type == "cuda":
        from gsexp.render import cuda

        return cuda.hit_counts(gaussians, camera)
    return reference_hit_counts(gaussians, camera)


@torch.no_grad()
def reference_hit_counts(gaussians, camera) -> torch.Tensor:
    camera = camera.to(gaussians.means.device)
    proj = preprocess(gaussians, camera)
    tiles = sort_pairs(proj, *duplicate(proj), camera.width, camera.height)
    counts = torch.zeros(len(gaussians), dtype=torch.long, device=gaussians.means.device)
    *_, rounds = blend_forward(proj.means2d, proj.conics, proj.opacities, proj.colors, tiles,
                               make_formula("vanilla"), camera.width, camera.height, keep_entries=True)
    for e in rounds:  # entries are (pair, pixel) contributions; padding pixels never contribute
        counts += torch.bincount(tiles.gauss_ids[e.pair], minlength=len(gaussians))
    return counts


@torch.no_grad()
def significance(gaussians, cameras, beta: float = 0.1) -> torch.Tensor:
    """[N] global significance over `cameras` (the training views)."""
    hits = torch.zeros(len(gaussians), dtype=torch.float64, device=gaussians.means.device)
    for cam in cameras:
        hits += hit_counts(gaussians, cam)
    volume = gaussians.log_scales.detach().double().sum(-1).exp()
    v90 = torch.quantile(volume, 0.1) if len(volume) else volume.new_ones(())
    return hits * gaussians.opacities.detach().double() * (volume / v90).pow(beta)
