"""Stage 1: project Gaussians, EWA 2D covariance, radius, tile rectangle, SH colour."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsexp.gaussians.geometry import covariance_3d
from gsexp.gaussians.sh import eval_sh
from gsexp.render.constants import COV2D_DILATION, FOV_CLAMP, INTERSECTS, NEAR_PLANE, TILE_SIZE
from gsexp.render.reference import intersect as tight


@dataclass
class Projected:
    """Per-Gaussian screen-space quantities (all [N, ...]; culled ones have radius 0)."""

    means2d: torch.Tensor    # [N,2] INRIA pixel coordinates (pixel centres at integers)
    conics: torch.Tensor     # [N,3] inverse 2D covariance (a, b, c)
    opacities: torch.Tensor  # [N]
    colors: torch.Tensor     # [N,3]
    depths: torch.Tensor     # [N] view-space z
    radii: torch.Tensor      # [N] int32 pixel radius, 0 when culled
    rect_min: torch.Tensor   # [N,2] int64 first tile (x, y), inclusive
    rect_max: torch.Tensor   # [N,2] int64 last tile (x, y), exclusive
    pairs: tuple | None = None  # accutile: (gauss_ids, tile (x, y)), as duplicate returns them


def preprocess(gaussians, camera, sh_degree: int | None = None, intersect: str = "aabb",
               antialiased: bool = False, dilation: float = COV2D_DILATION) -> Projected:
    """Everything per Gaussian that the blend needs, differentiable by autograd. `intersect`
    picks the tiles (reference/intersect.py); aabb is vanilla's 3-sigma square. dilation: px^2
    added to the 2D covariance's diagonal. antialiased: Mip-Splatting's 2D filter, the opacity
    times aa_compensation (the tight modes' ellipses then use that opacity)."""
    if intersect not in INTERSECTS:
        raise ValueError(f"render: intersect must be one of {INTERSECTS}, got {intersect!r}")
    w2c = camera.world_to_camera.to(gaussians.means)
    rot, trans = w2c[:3, :3], w2c[:3, 3]
    p_view = gaussians.means @ rot.T + trans
    z = p_view[:, 2]
    in_front = z > NEAR_PLANE
    z_safe = torch.where(in_front, z, torch.ones_like(z))  # keeps culled rows finite for autograd

    # EWA: Jacobian of the perspective map, taken at a point clamped to 1.3 x the field of view.
    tan_x, tan_y = camera.tan_half_fov
    lim_x, lim_y = FOV_CLAMP * tan_x, FOV_CLAMP * tan_y
    tx = (p_view[:, 0] / z_safe).clamp(-lim_x, lim_x) * z_safe
    ty = (p_view[:, 1] / z_safe).clamp(-lim_y, lim_y) * z_safe
    zero = torch.zeros_like(z_safe)
    jac = torch.stack([
        camera.fx / z_safe, zero, -camera.fx * tx / (z_safe * z_safe),
        zero, camera.fy / z_safe, -camera.fy * ty / (z_safe * z_safe),
    ], dim=-1).reshape(-1, 2, 3)
    t = jac @ rot
    cov2d = t @ covariance_3d(gaussians.log_scales, gaussians.quats) @ t.transpose(1, 2)
    a = cov2d[:, 0, 0] + dilation
    b = cov2d[:, 0, 1]
    c = cov2d[:, 1, 1] + dilation
    det = a * c - b * b
    valid = in_front & (det > 0)
    det_safe = torch.where(valid, det, torch.ones_like(det))
    conics = torch.stack([c / det_safe, -b / det_safe, a / det_safe], dim=-1)
    opacities = gaussians.opacities
    if antialiased:
        opacities = opacities * aa_compensation(cov2d[:, 0, 0], b, cov2d[:, 1, 1], valid, dilation)

    means2d = torch.stack([
        camera.fx * p_view[:, 0] / z_safe + camera.cx - 0.5,
        camera.fy * p_view[:, 1] / z_safe + camera.cy - 0.5,
    ], dim=-1)

    with torch.no_grad():
        mid = 0.5 * (a + c)
        root = (mid * mid - det).clamp_min(0.1).sqrt()
        radius = torch.ceil(3.0 * (mid + root).sqrt())  # mid + root is the larger eigenvalue
        radius = torch.where(valid, radius, torch.zeros_like(radius))
        pairs = None
        if intersect == "aabb":
            rect_min, rect_max = tile_rect(means2d, radius, camera.width, camera.height)
            valid = valid & ((rect_max - rect_min).prod(-1) > 0)
        else:
            sxx, sxy, syy, level, ok = tight.ellipse(conics, opacities)
            rect_min, rect_max, ok_rect = tight.snug_rect(means2d, sxx, syy, level, camera.width, camera.height)
            valid = valid & ok & ok_rect
            rect_max = torch.where(valid[:, None], rect_max, rect_min)  # culled: an empty box
            if intersect == "accutile":
                *pairs, counts = tight.accutile(means2d, sxx, sxy, syy, level, rect_min, rect_max,
                                                camera.width, camera.height)
                valid = valid & (counts > 0)
        radii = torch.where(valid, radius, torch.zeros_like(radius)).int()

    degree = gaussians.sh_degree if sh_degree is None else min(sh_degree, gaussians.sh_degree)
    cam_center = -rot.T @ trans
    dirs = torch.nn.functional.normalize(gaussians.means - cam_center, dim=-1)
    colors = eval_sh(gaussians.sh, dirs, degree)
    return Projected(means2d, conics, opacities, colors, z, radii, rect_min, rect_max,
                     None if pairs is None else tuple(pairs))


def aa_compensation(a0, b, c0, valid, dilation: float = COV2D_DILATION):
    """sqrt(det S / det(S + dilation I)) for the undilated 2D covariance S = [[a0, b], [b, c0]]:
    the dilated Gaussian keeps the mass of the undilated one (Mip-Splatting's 2D filter, gsplat's
    rasterize_mode="antialiased"). 0 where det S <= 0; culled rows (not `valid`) get 1."""
    det0 = a0 * c0 - b * b
    det = (a0 + dilation) * (c0 + dilation) - b * b
    ok = valid & (det0 > 0)
    one = torch.ones_like(det0)
    ratio = torch.where(ok, det0, one) / torch.where(ok, det, one)  # no 0/0 or sqrt'(0) in autograd
    return torch.where(ok, ratio.sqrt(), torch.where(valid, 0 * one, one))


def tile_rect(means2d: torch.Tensor, radius: torch.Tensor, width: int, height: int):
    """Tiles a square of half-size `radius` around each mean touches: [min, max) per axis."""
    grid = torch.tensor([tiles_along(width), tiles_along(height)], device=means2d.device)
    r = radius.unsqueeze(-1)
    lo = ((means2d - r) / TILE_SIZE).trunc().long()  # C's (int) cast truncates toward zero
    hi = ((means2d + r + TILE_SIZE - 1) / TILE_SIZE).trunc().long()
    return torch.minimum(lo.clamp_min(0), grid), torch.minimum(hi.clamp_min(0), grid)


def tiles_along(pixels: int) -> int:
    return (pixels + TILE_SIZE - 1) // TILE_SIZE
