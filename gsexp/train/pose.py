"""Camera pose refinement (pose_opt=true; gsplat's pose_opt): each training camera gets a
correction dT = exp(w, t) of its world-to-camera, w2c' = dT w2c, learnt with the model from zero
with `pose_opt_reg` x |(w, t)|^2 added to the loss. SfM poses are never exact, and a pose error
costs the model detail it cannot fit. Test cameras are not adjusted.

The corrected camera is rendered by moving the Gaussians instead: X' = w2c^-1 dT w2c X gives the
same means and covariances in the uncorrected camera, so every backend trains the correction
without a camera gradient. The view direction for the SH colour is left uncorrected (its error
is of the order of the correction's rotation)."""
from __future__ import annotations

import copy

import torch

from gsexp.train.per_view import PerView


def _skew(v: torch.Tensor) -> torch.Tensor:
    z = torch.zeros((), dtype=v.dtype, device=v.device)
    return torch.stack([torch.stack([z, -v[2], v[1]]), torch.stack([v[2], z, -v[0]]),
                        torch.stack([-v[1], v[0], z])])


def rotation(w: torch.Tensor) -> torch.Tensor:
    """Rodrigues: the rotation by |w| about w (differentiable at 0)."""
    theta = torch.sqrt(w.square().sum() + 1e-20)
    k = _skew(w)
    eye = torch.eye(3, dtype=w.dtype, device=w.device)
    return eye + torch.sin(theta) / theta * k + (1 - torch.cos(theta)) / theta.square() * (k @ k)


def quat_multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a * b of (w, x, y, z) quaternions; a [4], b [N, 4]."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


class PoseCorrection(PerView):
    def __init__(self, num_cameras: int, device, lr: float = 1e-5, reg: float = 1e-6):
        super().__init__((num_cameras, 6), device, lr, reg)  # (w, t) per camera

    def world_motion(self, view: int, w2c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A, b, q): X' = A X + b moves the world as camera `view`'s correction moves the camera
        the other way; q is A as a quaternion."""
        w, t = self.delta[view, :3], self.delta[view, 3:]
        rot, trans = w2c[:3, :3].to(w), w2c[:3, 3].to(w)
        dr = rotation(w)
        a = rot.T @ dr @ rot  # w2c^-1 dT w2c, rotation part
        b = rot.T @ (dr @ trans + t - trans)
        w_world = rot.T @ w  # A rotates by |w| about w seen in the world
        half = torch.sqrt(w_world.square().sum() + 1e-20) / 2
        q = torch.cat([torch.cos(half)[None], torch.sin(half) / (2 * half) * w_world])
        return a, b, q

    def apply(self, g, view: int, camera):
        """The Gaussians as camera `view`'s corrected pose sees them from its uncorrected one."""
        a, b, q = self.world_motion(view, camera.world_to_camera.to(g.means.device))
        moved = copy.copy(g)  # shallow, as training's parameter view (its SH parts) must stay
        moved.means, moved.quats = g.means @ a.T + b, quat_multiply(q, g.quats)
        return moved

    def summary(self) -> dict:
        """The mean correction over the training cameras: rotation (degrees) and translation."""
        d = self.delta.detach()
        return {"pose_mean_rotation_deg": float(torch.rad2deg(d[:, :3].norm(dim=1)).mean()),
                "pose_mean_translation": float(d[:, 3:].norm(dim=1).mean())}
