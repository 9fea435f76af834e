"""FastGS's multi-view scores (strategy=fastgs): where the model is wrong, seen from several views.

Per sampled training view: render it, take the per-pixel L1 error (the mean over channels),
normalise it to [0, 1] over the image (min-max), mark the pixels above the strategy's threshold
and count, per Gaussian, the marked pixels it contributes to (gsexp.render.hit_counts with a pixel
mask). The counts are summed over the views, and summed again weighted by each view's photometric
loss (the training loss's L1 + SSIM mix). The views are rendered as the trainer's evaluation does:
full size, the scene's background, without per-photo appearance or pose corrections; with
data.masks the masked-out pixels are never marked.
"""
from __future__ import annotations

import torch

from gsexp.losses import photometric_loss
from gsexp.render import hit_counts, render
from gsexp.train.setup import Run, gaussians


class ViewScorer:
    """scorer(k, seed) -> (marked-pixel counts [N], counts weighted by each view's loss [N]), over
    k training views drawn without replacement by a generator seeded with `seed`."""

    def __init__(self, run: Run):
        self.run = run

    @torch.no_grad()
    def __call__(self, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        run = self.run
        cfg, scene = run.cfg, run.scene
        n_views = len(scene.train_cameras)
        views = torch.randperm(n_views, generator=torch.Generator().manual_seed(seed))[:min(k, n_views)].tolist()
        g = gaussians(run)
        n = len(g.means)
        counts = torch.zeros(n, device=run.device)
        weighted = torch.zeros(n, device=run.device)
        threshold = run.strategy.error_threshold
        for view in views:
            camera, target = scene.train_cameras[view], run.images[view]
            image = render(g, camera, run.settings, background=tuple(scene.background)).image
            marked = wrong_pixels(image, target, threshold,
                                  None if run.masks is None else run.masks[view])
            hits = hit_counts(g, camera, run.settings, pixel_mask=marked).float()
            loss = photometric_loss(image, target, cfg.ssim_lambda, fused=cfg.fused_ssim)
            counts += hits
            weighted += loss * hits
        return counts, weighted


def wrong_pixels(image: torch.Tensor, target: torch.Tensor, threshold: float,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """[H, W] bool: the pixels whose mean |image - target| over channels, min-max normalised over
    the image, exceeds `threshold` (mask: [1, H, W], only where it is > 0.5)."""
    error = (image - target).abs().mean(0)
    if mask is not None:
        error = error * (mask[0] > 0.5)
    low, high = error.min(), error.max()
    return (error - low) / (high - low).clamp_min(1e-12) > threshold
