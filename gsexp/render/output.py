"""What every rasterizer backend returns."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gsexp.render.constants import STAGES  # noqa: F401  (the names stage_ms uses)


@dataclass
class RenderOutput:
    image: torch.Tensor      # [3,H,W]
    alpha: torch.Tensor      # [H,W], 1 - final transmittance
    n_contrib: torch.Tensor  # [H,W] int32, position of the last contributor in its tile list
    radii: torch.Tensor      # [N] int32, 0 for culled Gaussians
    means2d: torch.Tensor    # [N,2] pixel coordinates; .grad after backward (densification)
    depths: torch.Tensor     # [N] view-space z
    stage_ms: dict = field(default_factory=dict)  # filled when settings.timing (backward: after it)
    num_pairs: int = 0       # (tile, Gaussian) pairs (a device tensor when render() had a capacity)
    depth: torch.Tensor | None = None              # [H,W] expected depth sum w z / sum w (settings.depth)
    depth_accumulated: torch.Tensor | None = None  # [H,W] sum w z, w = alpha T (settings.depth)
    # [N,2] (settings.absgrad) AbsGS's statistic: zeros until backward() adds, per Gaussian and axis,
    # the sum over its pixels of |dL_pixel / d means2d| (gsplat's means2d.absgrad); .grad sums them signed
    means2d_absgrad: torch.Tensor | None = None

    @property
    def visible(self) -> torch.Tensor:
        return self.radii > 0
