"""Depth as a picture: what `python -m gsexp.eval ... depth=true`, `python -m gsexp.video
--channel depth` and the viewer's Channel control show.

The expected depth (the rasterizer's `depth` switch: out.depth, Σ w z / Σ w) goes from `near`
(red) to `far` (blue) through matplotlib's "turbo" colour map, and is drawn over black with the
pixel's alpha, so where nothing is drawn the picture is black. Unless given, near and far are the
2nd and 98th percentiles of the depth of the pixels at least half covered, so a few stray
Gaussians close to the camera do not flatten the rest.
"""
from __future__ import annotations

import torch

_LUT: dict[torch.device, torch.Tensor] = {}
COVERED = 0.5                 # alpha from which a pixel's depth sets the range
PERCENTILES = (0.02, 0.98)    # the range's ends among those pixels


def _turbo(device: torch.device) -> torch.Tensor:
    """[256, 3] float: matplotlib's turbo, read once (imported here only: it is slow)."""
    if device not in _LUT:
        import numpy as np
        from matplotlib import colormaps

        _LUT[device] = torch.tensor(colormaps["turbo"](np.linspace(0, 1, 256))[:, :3], dtype=torch.float32,
                                    device=device)
    return _LUT[device]


def depth_range(depth: torch.Tensor, alpha: torch.Tensor) -> tuple[float, float]:
    """(near, far) of an [H, W] expected depth, from its pixels with alpha >= COVERED; (0, 1)
    when no pixel is; far > near always."""
    values = depth[alpha >= COVERED].float()
    if values.numel() == 0:
        return 0.0, 1.0
    if values.numel() > 1 << 24:  # torch.quantile's limit; a strided sample is as good
        values = values[:: values.numel() // (1 << 23) + 1]
    near, far = torch.quantile(values, torch.tensor(PERCENTILES, device=values.device)).tolist()
    return near, max(far, near + 1e-6 * max(1.0, abs(near)))


def depth_colors(depth: torch.Tensor, alpha: torch.Tensor, near: float | None = None,
                 far: float | None = None) -> torch.Tensor:
    """[3, H, W] float in [0, 1]: the [H, W] expected depth coloured near (red) to far (blue),
    times alpha over black. near/far: the range (default depth_range's)."""
    if depth.shape != alpha.shape or depth.dim() != 2:
        raise ValueError(f"depth_colors: depth {tuple(depth.shape)} and alpha {tuple(alpha.shape)} must be "
                         "the same [H, W]")
    if near is None or far is None:
        near, far = depth_range(depth, alpha)
    if not far > near:
        raise ValueError(f"depth range: far ({far}) must be greater than near ({near})")
    t = ((depth.float() - near) / (far - near)).clamp(0, 1)
    index = ((1 - t) * 255).round().long()  # near is the map's top (red)
    return (_turbo(depth.device)[index] * alpha.float().clamp(0, 1)[..., None]).permute(2, 0, 1)

