"""Mip-Splatting's 3D smoothing filter (Yu et al. 2024; model.filter_3d=true): each Gaussian is
widened by an isotropic Gaussian of standard deviation sqrt(size) / rate, `rate` the finest
sampling rate any training camera sees it at (focal / depth, pixels per world unit), and its
opacity scaled by sqrt(det S / det(S + filter)) so its integral stays. A Gaussian then never gets
thinner than the training images could show, which is what lets a model be rendered closer or at
higher resolution than it was trained at without thin-spike artefacts. It pairs with
`rasterizer.antialiased` (the 2D filter) for the whole of Mip-Splatting.

Rates come from the full-size training cameras: a camera counts where the mean lies past the
near plane and projects within 15 % of the image's size beyond its border (Mip-Splatting's rule);
a Gaussian no camera sees takes the coarsest rate of those seen. Mip-Splatting divides the
nearest depth by the largest focal length over all cameras; here each camera's own focal / depth
is used, the same for cameras of one focal length. They are recomputed every `every` steps and
whenever densification changed the count (Mip-Splatting: after each densification, then every
100 steps), with no gradient, and once more for the trained model. The filter is applied to the
parameters on every render, so the parameters stay the unfiltered ones (densification, opacity
resets, which like Mip-Splatting's bound the opacity as rendered: `opacity_factor`). A checkpoint
keeps the filter beside them (`filter_3d`), so whatever reads a run's model
(gsexp.eval, export, bench, the viewer) gets it filtered, and the exported PLY holds the filtered
model."""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from gsexp.render.constants import NEAR_PLANE

BORDER = 0.15      # the fraction of the image size beyond its border that still counts as seen
PAIRS = 1 << 24    # camera x Gaussian pairs per chunk: bounds the temporaries (~64 MB each)


class Filter3D:
    def __init__(self, cameras, device, size: float = 0.2, every: int = 100):
        w2c = torch.stack([c.world_to_camera.detach().to("cpu", torch.float32) for c in cameras]).to(device)
        self.rot, self.trans = w2c[:, :3, :3], w2c[:, :3, 3]
        values = [[c.fx, c.fy, c.cx, c.cy, c.width, c.height] for c in cameras]
        self.fx, self.fy, self.cx, self.cy, self.width, self.height = torch.tensor(values, device=device).T
        self.size, self.every = size, every
        self.std = None  # [N]: the filter's standard deviation in world units

    @torch.no_grad()
    def refresh(self, means: torch.Tensor, step: int | None = None, force: bool = False) -> None:
        """Recompute the filter on every `every`-th step, and when it has none for these means."""
        due = force or step is not None and step % self.every == 0
        if self.std is not None and len(self.std) == len(means) and not due:
            return
        self.std = math.sqrt(self.size) / self.rates(means.detach())

    def rates(self, means: torch.Tensor) -> torch.Tensor:
        """[N] the finest sampling rate any camera sees each mean at (the coarsest seen one for
        means no camera sees; inf, so no filter, when no camera sees any)."""
        rate = means.new_zeros(len(means))
        chunk = max(1, PAIRS // max(len(means), 1))
        for i in range(0, len(self.rot), chunk):
            cam = slice(i, i + chunk)
            x = torch.einsum("cij,nj->cni", self.rot[cam], means) + self.trans[cam, None, :]
            z = x[..., 2]
            depth = z.clamp_min(1e-6)
            u = self.fx[cam, None] * x[..., 0] / depth + self.cx[cam, None]
            v = self.fy[cam, None] * x[..., 1] / depth + self.cy[cam, None]
            w, h = self.width[cam, None], self.height[cam, None]
            seen = (z > NEAR_PLANE) & (u >= -BORDER * w) & (u <= (1 + BORDER) * w) \
                & (v >= -BORDER * h) & (v <= (1 + BORDER) * h)
            focal = torch.maximum(self.fx, self.fy)[cam, None]
            rate = torch.maximum(rate, torch.where(seen, focal / depth, 0.0).amax(0))
        coarsest = torch.where(rate > 0, rate, math.inf).amin()  # no boolean indexing: no host sync
        return torch.where(rate > 0, rate, coarsest)

    def apply(self, g):
        """The Gaussians with the filter (see `filtered`)."""
        self.refresh(g.means)  # a first render before any training step (a resumed run's evaluation)
        return filtered(g, self.std)

    @torch.no_grad()
    def opacity_factor(self, means: torch.Tensor, log_scales: torch.Tensor) -> torch.Tensor:
        """[N] what the filter multiplies each opacity by, sqrt(det S / det(S + filter)): for the
        strategies' opacity resets, which Mip-Splatting applies to the opacity as rendered."""
        self.refresh(means)  # densification may have changed the count this step
        return _log_widened(log_scales, self.std)[1].exp()


def _log_widened(log_scales: torch.Tensor, std: torch.Tensor):
    """(log of the widened scales sqrt(s^2 + std^2), log of the opacity factor sum(log s - log s'))."""
    log_std = std.to(log_scales).log()[:, None]  # -inf where there is no filter
    wide = 0.5 * torch.logaddexp(2 * log_scales, 2 * log_std)
    return wide, (log_scales - wide).sum(1)


def filtered(g, std: torch.Tensor):
    """g widened by the filter of standard deviation `std` [N]: scales sqrt(s^2 + std^2), opacity x
    sqrt(det S / det(S + std^2 I)). Also how a checkpoint's model is read (it keeps `std`)."""
    log_scales, log_factor = _log_widened(g.log_scales, std)
    # log opacity' = log sigmoid(x) + sum(log s - log s'), then back to a logit, in log space
    log_opacity = (F.logsigmoid(g.opacity_logits) + log_factor).clamp(max=-1e-7)
    out = copy.copy(g)  # shallow, as training's parameter view (its SH parts) must stay
    out.log_scales = log_scales
    out.opacity_logits = log_opacity - torch.log(-torch.expm1(log_opacity))
    return out
