"""Real spherical harmonics up to degree 3, with the constants and order of 3DGS."""
from __future__ import annotations

import torch

C0 = 0.28209479177387814
C1 = 0.4886025119029199
C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005,
      -1.0925484305920792, 0.5462742152960396)
C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
      -0.4570457994644658, 1.445305721320277, -0.5900435899266435)


def num_sh_bases(degree: int) -> int:
    return (degree + 1) ** 2


def sh_degree_of(num_bases: int) -> int:
    """The SH degree that has `num_bases` coefficients per channel (1, 4, 9 or 16)."""
    degree = round(num_bases ** 0.5) - 1
    if not 0 <= degree <= 3 or num_sh_bases(degree) != num_bases:
        raise ValueError(f"{num_bases} SH coefficients per channel is no SH degree (1, 4, 9 or 16)")
    return degree


def sh_basis(dirs: torch.Tensor, degree: int) -> torch.Tensor:
    """Basis values [N, (degree+1)^2] at unit directions [N, 3]."""
    x, y, z = dirs.unbind(-1)
    out = [torch.full_like(x, C0)]
    if degree > 0:
        out += [-C1 * y, C1 * z, -C1 * x]
    if degree > 1:
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        out += [C2[0] * xy, C2[1] * yz, C2[2] * (2 * zz - xx - yy), C2[3] * xz, C2[4] * (xx - yy)]
    if degree > 2:
        out += [
            C3[0] * y * (3 * xx - yy),
            C3[1] * xy * z,
            C3[2] * y * (4 * zz - xx - yy),
            C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
            C3[4] * x * (4 * zz - xx - yy),
            C3[5] * z * (xx - yy),
            C3[6] * x * (xx - 3 * yy),
        ]
    return torch.stack(out, dim=-1)


def eval_sh(sh: torch.Tensor, dirs: torch.Tensor, degree: int) -> torch.Tensor:
    """RGB [N, 3] from coefficients [N, K, 3] seen along unit `dirs` [N, 3].

    As in 3DGS: only the first (degree+1)^2 coefficients count, +0.5, clamped at 0.
    """
    k = num_sh_bases(degree)
    basis = sh_basis(dirs, degree)  # [N, k]
    rgb = (basis.unsqueeze(-1) * sh[:, :k]).sum(1) + 0.5
    return rgb.clamp_min(0.0)


def rgb_to_sh(rgb: torch.Tensor) -> torch.Tensor:
    return (rgb - 0.5) / C0


def sh_to_rgb(sh0: torch.Tensor) -> torch.Tensor:
    return sh0 * C0 + 0.5
