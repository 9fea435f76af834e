"""Camera pose refinement (pose_opt=true; gsplat's pose_opt): each training camera gets a
correction dT = exp(w, t) of its world-to-camera, w2c' = dT w2c, learnt with the model from zero
with `pose_opt_reg` x |(w, t)|^2 added to the loss. SfM poses are never exact, and a pose error
costs the model detail it cannot fit. Test cameras are not adjusted.

The corrected camera is rendered by moving the Gaussians instead: X' = w2c^-1 dT w2c X gives the
same means and covariances in the uncorrected camera, so every backend trains the correction
without a camera gradient. The view direction for the SH colour is left uncorrected (its error
is of the order of the correction's rotation).

This runs every training step, and such a step is bound by the host: the cameras live on the
device from the start (a per-step copy from pageable memory would wait for the GPU), and the
motion is a handful of small ops (two constant tensors turn a quaternion into its rotation and
its left product)."""
from __future__ import annotations

import copy
import itertools

import torch

from gsexp.train.per_view import PerView


def _left_product(q) -> list[list]:
    """L(q) with L(q) p = q * p (Hamilton product, (w, x, y, z) order)."""
    w, x, y, z = q
    return [[w, -x, -y, -z], [x, w, -z, y], [y, z, w, -x], [z, -y, x, w]]


def _rotation_of(q) -> list[list]:
    """The rotation of a unit quaternion, each entry a quadratic form in q (1 = |q|^2)."""
    w, x, y, z = q
    return [[w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]]


def _constants() -> tuple[torch.Tensor, torch.Tensor]:
    """(P [4,4,4], C [3,3,4,4]): L(q) = P q and R(q)_ij = q^T C_ij q."""
    basis = torch.eye(4, dtype=torch.float64)
    left = torch.stack([torch.tensor(_left_product(e.tolist()), dtype=torch.float64) for e in basis], -1)
    rot = torch.zeros(3, 3, 4, 4, dtype=torch.float64)
    for k, l in itertools.product(range(4), repeat=2):  # polarisation of the quadratic form
        both = torch.tensor(_rotation_of((basis[k] + basis[l]).tolist()), dtype=torch.float64)
        one, other = (torch.tensor(_rotation_of(basis[i].tolist()), dtype=torch.float64) for i in (k, l))
        rot[:, :, k, l] = one if k == l else (both - one - other) / 2
    return left, rot


class PoseCorrection(PerView):
    def __init__(self, cameras, device, lr: float = 1e-5, reg: float = 1e-6):
        """cameras: the training cameras, in the order of their view indices."""
        super().__init__((len(cameras), 6), device, lr, reg)  # (w, t) per camera
        w2c = torch.stack([c.world_to_camera.detach().to("cpu", torch.float64) for c in cameras])
        rot_t = w2c[:, :3, :3].transpose(1, 2)
        self.rot_t = rot_t.to(device, torch.float32)  # camera-to-world rotations
        self.center = (-rot_t @ w2c[:, :3, 3:]).squeeze(-1).to(device, torch.float32)
        left, rot = _constants()
        self.left, self.rot = left.to(device, torch.float32), rot.to(device, torch.float32)

    def world_motion(self, view: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A, b, q): X' = A X + b moves the world as camera `view`'s correction moves the camera
        the other way; q is A as a quaternion. With w2c = [R | t] and centre c = -R^T t:
        A = R^T dR R, the rotation by |w| about R^T w, and b = c - A c + R^T t_corr."""
        rot_t, center = self.rot_t[view], self.center[view]
        w_world = rot_t @ self.delta[view, :3]
        theta = (w_world.square().sum() + 1e-20).sqrt()
        q = torch.cat([torch.cos(theta / 2)[None], torch.sin(theta / 2) / theta * w_world])
        a = torch.einsum("ijkl,k,l->ij", self.rot, q, q)
        b = torch.addmv(rot_t @ self.delta[view, 3:], a, center, alpha=-1) + center
        return a, b, q

    def apply(self, g, view: int):
        """The Gaussians as camera `view`'s corrected pose sees them from its uncorrected one."""
        a, b, q = self.world_motion(view)
        moved = copy.copy(g)  # shallow, as training's parameter view (its SH parts) must stay
        moved.means = torch.addmm(b, g.means, a.T)
        moved.quats = g.quats @ torch.einsum("ijk,k->ij", self.left, q).T
        return moved

    def summary(self) -> dict:
        """The mean correction over the training cameras: rotation (degrees) and translation."""
        d = self.delta.detach()
        return {"pose_mean_rotation_deg": float(torch.rad2deg(d[:, :3].norm(dim=1)).mean()),
                "pose_mean_translation": float(d[:, 3:].norm(dim=1).mean())}
