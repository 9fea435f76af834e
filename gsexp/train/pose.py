"""Camera pose refinement (pose_opt=true; gsplat's pose_opt): each training camera gets a
correction dT = exp(w, t) of its world-to-camera, w2c' = dT w2c, learnt with the model from zero
with `pose_opt_reg` x |(w, t)|^2 added to the loss. SfM poses are never exact, and a pose error
costs the model detail it cannot fit. Test cameras are not adjusted.

The corrected camera is rendered by moving the Gaussians instead: X' = w2c^-1 dT w2c X gives the
same means and covariances in the uncorrected camera, so every backend trains the correction
without a camera gradient. The view direction for the SH colour is left uncorrected (its error
is of the order of the correction's rotation).

This runs every training step, and such a step is bound by the host: the cameras live on the
device from the start (a per-step copy from pageable memory would wait for the GPU). On a GPU the
motion is one kernel forward and three backward (csrc/pose.cu: ~40 torch ops made beer train
1.9x slower); elsewhere a handful of small ops (one constant matrix turns the quaternion into
the linear parts of its rotation and of its left product) with a backward written out, not
autograd's graph of them (experiments/real_captures/feature_ops.py counts the ops). The two agree
(tests/test_pose.py on a GPU)."""
from __future__ import annotations

import copy
import itertools
import math

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


def _linear() -> torch.Tensor:
    """[52, 4] float64: times q, rows 0-35 are C_ij q (so R(q)_ij = q^T C_ij q = (C_ij q) . q) and
    rows 36-51 are L(q) = P q, the left product."""
    basis = torch.eye(4, dtype=torch.float64)
    left = torch.stack([torch.tensor(_left_product(e.tolist()), dtype=torch.float64) for e in basis], -1)
    rot = torch.zeros(3, 3, 4, 4, dtype=torch.float64)
    for k, l in itertools.product(range(4), repeat=2):  # polarisation of the quadratic form
        both = torch.tensor(_rotation_of((basis[k] + basis[l]).tolist()), dtype=torch.float64)
        one, other = (torch.tensor(_rotation_of(basis[i].tolist()), dtype=torch.float64) for i in (k, l))
        rot[:, :, k, l] = one if k == l else (both - one - other) / 2
    return torch.cat([rot.reshape(36, 4), left.reshape(16, 4)])


class PoseCorrection(PerView):
    def __init__(self, cameras, device, lr: float = 1e-5, reg: float = 1e-6):
        """cameras: the training cameras, in the order of their view indices."""
        super().__init__((len(cameras), 6), device, lr, reg)  # (w, t) per camera
        w2c = torch.stack([c.world_to_camera.detach().to("cpu", torch.float64) for c in cameras])
        rot_t = w2c[:, :3, :3].transpose(1, 2)
        self.rot_t = rot_t.to(device, torch.float32)  # camera-to-world rotations
        self.center = (-rot_t @ w2c[:, :3, 3:]).squeeze(-1).to(device, torch.float32)
        self.linear = _linear().to(device, torch.float32)

    def world_motion(self, view: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A, b, q): X' = A X + b moves the world as camera `view`'s correction moves the camera
        the other way; q is A as a quaternion. With w2c = [R | t] and centre c = -R^T t:
        A = R^T dR R, the rotation by |w| about R^T w, and b = c - A c + R^T t_corr."""
        m = _motion(self.delta[view], self.rot_t[view], self.center[view], self.linear)
        return m["a"], m["b"], m["q"]

    def apply(self, g, view: int):
        """The Gaussians as camera `view`'s corrected pose sees them from its uncorrected one."""
        moved = copy.copy(g)  # shallow, as training's parameter view (its SH parts) must stay
        if g.means.is_cuda:  # one launch forward, three backward (csrc/pose.cu)
            moved.means, moved.quats = _MoveCuda.apply(g.means, g.quats, self.delta[view], self.rot_t[view],
                                                       self.center[view])
        else:
            moved.means, moved.quats = _Move.apply(g.means, g.quats, self.delta[view], self.rot_t[view],
                                                   self.center[view], self.linear)
        return moved

    def summary(self) -> dict:
        """The mean correction over the training cameras: rotation (degrees) and translation."""
        d = self.delta.detach()
        return {"pose_mean_rotation_deg": float(torch.rad2deg(d[:, :3].norm(dim=1)).mean()),
                "pose_mean_translation": float(d[:, 3:].norm(dim=1).mean())}


def _motion(delta, rot_t, center, linear) -> dict:
    """The motion of one camera's correction delta = (w, t) and what its backward reuses."""
    w = rot_t @ delta[:3]  # the rotation vector in world axes
    theta = torch.linalg.vector_norm(w)
    s = torch.sinc(theta * (0.5 / math.pi)) * 0.5  # sin(theta/2) / theta, smooth at 0
    q = torch.cat([torch.cos(theta * 0.5)[None], s * w])
    parts = linear @ q
    x = parts[:36].view(9, 4)  # A_ij = q^T C_ij q = (C_ij q) . q
    a = (x @ q).view(3, 3)
    b = torch.addmv(torch.addmv(center, rot_t, delta[3:]), a, center, alpha=-1)
    return {"w": w, "theta": theta, "s": s, "q": q, "x": x, "a": a, "b": b, "left": parts[36:].view(4, 4)}


class _Move(torch.autograd.Function):
    """(means, quats) -> (means A^T + b, quats L(q)^T), differentiable in the means, the quats and
    the 6 numbers of delta. The backward is written out: autograd's graph of the 6-number motion
    is ~200 tiny ops, each a host dispatch every training step; this is ~25."""

    @staticmethod
    def forward(ctx, means, quats, delta, rot_t, center, linear):
        m = _motion(delta, rot_t, center, linear)
        ctx.save_for_backward(means, quats, rot_t, center, linear, m["w"], m["theta"], m["s"], m["q"], m["x"], m["a"],
                              m["left"])
        return torch.addmm(m["b"], means, m["a"].T), quats @ m["left"].T

    @staticmethod
    def backward(ctx, g_means, g_quats):
        means, quats, rot_t, center, linear, w, theta, s, q, x, a, left = ctx.saved_tensors
        g_b = g_means.sum(0)
        g_a = torch.addr(g_means.T @ means, g_b, center, alpha=-1)  # b = c - A c + R t
        # A_ij = q^T C_ij q with C_ij symmetric: dA_ij/dq = 2 x_ij; L = P q: dL/dq = P
        g_q = torch.addmv(linear[36:].T @ (g_quats.T @ quats).reshape(16), x.T, g_a.reshape(9), alpha=2)
        # q = (cos(theta/2), s w): dq0/dw = -(s/2) w; d(s w)/dw = s I + k w w^T, k = s'(theta) / theta,
        # = (cos(theta/2)/2 - s) / theta^2, which cancels near 0: there its series (to theta^6,
        # within 2e-13 relative below 0.3)
        t2 = theta * theta
        k = torch.where(theta < 0.3, t2 * (1 / 960 - t2 * (1 / 107520 - t2 / 23224320)) - 1 / 24,
                        (q[0] * 0.5 - s) / t2)
        g_v = g_q[1:]
        g_w = s * g_v + (k * (g_v @ w) - 0.5 * s * g_q[0]) * w
        g_delta = torch.cat([rot_t.T @ g_w, rot_t.T @ g_b])
        return g_means @ a, g_quats @ left, g_delta, None, None, None


class _MoveCuda(torch.autograd.Function):
    """_Move's maths in csrc/pose.cu: the motion from delta on the device (no host sync), the
    Gaussians moved in one launch; backward per Gaussian plus the sums delta's gradient needs."""

    @staticmethod
    def forward(ctx, means, quats, delta, rot_t, center):
        from gsexp.render.cuda.build import load

        means, quats, rot_t = means.contiguous(), quats.contiguous(), rot_t.contiguous()
        ctx.save_for_backward(means, quats, delta, rot_t, center)
        moved_means, moved_quats = load().pose_move_forward(means, quats, delta, rot_t, center)
        return moved_means, moved_quats

    @staticmethod
    def backward(ctx, g_means, g_quats):
        from gsexp.render.cuda.build import load

        means, quats, delta, rot_t, center = ctx.saved_tensors
        g_means_in, g_quats_in, g_delta = load().pose_move_backward(
            g_means.contiguous(), g_quats.contiguous(), means, quats, delta, rot_t, center)
        return g_means_in, g_quats_in, g_delta, None, None
