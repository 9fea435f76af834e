"""Rotation and covariance of Gaussians, shared by the rasterizers and the strategies."""
from __future__ import annotations

import torch


def quat_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """[..., 3, 3] rotation of quaternions [..., 4] (w, x, y, z; normalised here)."""
    q = torch.nn.functional.normalize(q, dim=-1)
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(q.shape[:-1] + (3, 3))


def covariance_3d(log_scales: torch.Tensor, quats: torch.Tensor) -> torch.Tensor:
    """R diag(s)^2 R^T."""
    m = quat_to_rotmat(quats) * log_scales.exp().unsqueeze(-2)  # R S
    return m @ m.transpose(-1, -2)
