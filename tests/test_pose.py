"""pose_opt (issue 41): a pose correction per training camera, rendered by moving the Gaussians;
the moved Gaussians render what the corrected camera sees, and the correction recovers a known
perturbation of the synthetic scene's cameras."""
import dataclasses
import math

import pytest
import torch

from gsexp.gaussians import Gaussians
from gsexp.render import make_settings, render
from gsexp.scene import load_scene
from gsexp.train.pose import PoseCorrection

SETTINGS = make_settings("torch")


def rotation(w: torch.Tensor) -> torch.Tensor:
    """Rodrigues' formula, the reference: the rotation by |w| about w."""
    theta = w.norm()
    k = torch.zeros(3, 3, dtype=w.dtype)
    k[0, 1], k[0, 2], k[1, 2] = -w[2], w[1], -w[0]
    k = k - k.T
    return torch.eye(3, dtype=w.dtype) + torch.sin(theta) / theta * k + (1 - torch.cos(theta)) / theta ** 2 * (k @ k)


def hamilton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a * b for (w, x, y, z) quaternions a [4], b [N, 4]."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def scene():
    s = load_scene("synthetic", num_gaussians=300, num_views=8, width=32, height=32, num_points=0)
    g = s.meta["ground_truth"]
    return s, Gaussians(g.means, g.log_scales, g.quats, g.opacity_logits, g.sh[:, :1], 0)


def corrected(camera, delta):
    dt = torch.eye(4, dtype=torch.float64)
    dt[:3, :3], dt[:3, 3] = rotation(delta[:3].double()), delta[3:].double()
    return dataclasses.replace(camera, world_to_camera=(dt @ camera.world_to_camera.double()).float())


def test_moved_gaussians_render_what_the_corrected_camera_sees():
    s, g = scene()
    cam = s.train_cameras[0]
    pose = PoseCorrection([cam], "cpu")
    with torch.no_grad():
        pose.delta[0] = torch.tensor([0.02, -0.03, 0.01, 0.05, -0.02, 0.03])
    moved = render(pose.apply(g, 0), cam, SETTINGS).image
    truth = render(g, corrected(cam, pose.delta[0].detach()), SETTINGS).image
    assert (moved - truth).abs().max() < 1e-4
    assert (moved - render(g, cam, SETTINGS).image).abs().max() > 0.05  # the correction does move the view


def test_recovers_a_known_perturbation_of_the_cameras():
    s, g = scene()
    views = [0, 1]
    targets = [render(g, s.train_cameras[v], SETTINGS).image for v in views]
    perturb = [torch.tensor([0.03, -0.02, 0.02, 0.04, 0.03, -0.03]), torch.tensor([-0.02, 0.03, -0.01, -0.03, 0.02, 0.04])]
    cams = [corrected(s.train_cameras[v], p) for v, p in zip(views, perturb)]  # what SfM got wrong
    pose = PoseCorrection(cams, "cpu", lr=2e-3, reg=0.0)
    start = [(render(g, c, SETTINGS).image - t).abs().mean().item() for c, t in zip(cams, targets)]
    for i in range(240):
        v = i % 2
        loss = (render(pose.apply(g, v), cams[v], SETTINGS).image - targets[v]).abs().mean()
        loss.backward()
        pose.step()
    end = [(render(pose.apply(g, v), cams[v], SETTINGS).image - targets[v]).abs().mean().item() for v in (0, 1)]
    assert all(e < 0.2 * s0 for e, s0 in zip(end, start)), (start, end)
    for v in (0, 1):  # corrected camera = true camera: dT (P w2c) = w2c
        fixed = corrected(cams[v], pose.delta[v].detach()).world_to_camera
        true = s.train_cameras[v].world_to_camera
        rot_err = torch.linalg.matrix_norm(fixed[:3, :3] - true[:3, :3]).item()
        rot_was = torch.linalg.matrix_norm(cams[v].world_to_camera[:3, :3] - true[:3, :3]).item()
        assert rot_err < 0.3 * rot_was and (fixed[:3, 3] - true[:3, 3]).norm() < 0.3 * (cams[v].world_to_camera[:3, 3] - true[:3, 3]).norm()
    summary = pose.summary()
    assert 0 < summary["pose_mean_rotation_deg"] < 5 and not math.isnan(summary["pose_mean_translation"])


def test_world_motion_is_the_conjugated_correction():
    """A = R^T dR R, b = R^T (dR t + t_corr - t), q = A's quaternion, quats rotated by q: against
    Rodrigues and the Hamilton product in float64, for random cameras and corrections."""
    s, g = scene()
    torch.manual_seed(7)
    cams = s.train_cameras[:3]
    pose = PoseCorrection(cams, "cpu")
    with torch.no_grad():
        pose.delta.copy_(torch.randn(3, 6) * 0.2)
    quats = torch.nn.functional.normalize(torch.randn(50, 4), dim=1)
    for v, cam in enumerate(cams):
        d = pose.delta[v].detach().double()
        w2c = cam.world_to_camera.double()
        rot, trans = w2c[:3, :3], w2c[:3, 3]
        a, b, q = (t.detach().double() for t in pose.world_motion(v))
        dr = rotation(d[:3])
        assert torch.allclose(a, rot.T @ dr @ rot, atol=1e-5)
        assert torch.allclose(b, rot.T @ (dr @ trans + d[3:] - trans), atol=1e-5)
        qw, qv = q[0], q[1:]  # q's rotation is A
        assert torch.allclose((qw ** 2 - qv @ qv) * torch.eye(3, dtype=q.dtype) + 2 * torch.outer(qv, qv)
                              + 2 * qw * torch.tensor([[0, -qv[2], qv[1]], [qv[2], 0, -qv[0]], [-qv[1], qv[0], 0]],
                                                      dtype=q.dtype), a, atol=1e-5)
        g50 = Gaussians(g.means[:50], g.log_scales[:50], quats, g.opacity_logits[:50], g.sh[:50], 0)
        moved = pose.apply(g50, v)
        assert torch.allclose(moved.quats.double(), hamilton(q, quats.double()), atol=1e-6)
        assert torch.allclose(moved.means.double(), g50.means.double() @ a.T + b, atol=1e-5)


def test_the_written_out_backward_is_autograds():
    """apply()'s backward is written by hand (fewer host dispatches per step): in float64 it passes
    gradcheck and equals autograd's gradient of the same motion, at zero (where training starts),
    on both sides of the series switch (|w| = 0.3) and for large rotations."""
    from gsexp.train.pose import _Move, _linear, _motion

    linear = _linear()
    gen = torch.Generator().manual_seed(3)
    rot_t = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))[0]
    center = torch.randn(3, generator=gen, dtype=torch.float64)
    for norm in (0.0, 1e-4, 0.29, 0.31, 2.5):
        w = torch.randn(3, generator=gen, dtype=torch.float64)
        delta = torch.cat([w / w.norm() * norm, torch.randn(3, generator=gen, dtype=torch.float64)]).requires_grad_()
        means = torch.randn(20, 3, generator=gen, dtype=torch.float64, requires_grad=True)
        quats = torch.randn(20, 4, generator=gen, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda m, q, d: _Move.apply(m, q, d, rot_t, center, linear), (means, quats, delta))
        up = (torch.randn(20, 3, generator=gen, dtype=torch.float64), torch.randn(20, 4, generator=gen, dtype=torch.float64))
        m = _motion(delta, rot_t, center, linear)
        want = torch.autograd.grad((torch.addmm(m["b"], means, m["a"].T), quats @ m["left"].T), (means, quats, delta), up)
        got = torch.autograd.grad(_Move.apply(means, quats, delta, rot_t, center, linear), (means, quats, delta), up)
        for g, r in zip(got, want):
            assert torch.allclose(g, r, rtol=1e-9, atol=1e-12), (norm, g, r)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("norm", [0.0, 1e-4, 0.29, 0.31, 2.5])
def test_the_kernel_moves_and_differentiates_as_the_float64_motion(norm):
    """On a GPU apply() runs csrc/pose.cu: its moved means and quats and its gradients (means,
    quats, the camera's 6 numbers) equal _Move's in float64 to float32's precision, at zero, on
    both sides of the series switch and for a large rotation; many Gaussians, so the sums cross
    blocks."""
    from gsexp.train.pose import _linear, _Move, _MoveCuda

    gen = torch.Generator().manual_seed(int(norm * 100) + 7)
    n = 70_000
    rot_t = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))[0]
    center = torch.randn(3, generator=gen, dtype=torch.float64)
    w = torch.randn(3, generator=gen, dtype=torch.float64)
    delta = torch.cat([w / w.norm() * norm, 0.1 * torch.randn(3, generator=gen, dtype=torch.float64)])
    means = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    quats = torch.randn(n, 4, generator=gen, dtype=torch.float64)
    up = (torch.randn(n, 3, generator=gen, dtype=torch.float64), torch.randn(n, 4, generator=gen, dtype=torch.float64))
    leaves64 = [t.clone().requires_grad_() for t in (means, quats, delta)]
    want_out = _Move.apply(*leaves64, rot_t, center, _linear())
    want = torch.autograd.grad(want_out, leaves64, up)
    leaves32 = [t.float().cuda().requires_grad_() for t in (means, quats, delta)]
    got_out = _MoveCuda.apply(*leaves32, rot_t.float().cuda(), center.float().cuda())
    got = torch.autograd.grad(got_out, leaves32, tuple(u.float().cuda() for u in up))
    for name, g, r in zip(("means", "quats", "means grad", "quats grad", "delta grad"), (*got_out, *got), (*want_out, *want)):
        err = (g.double().cpu() - r).abs().max() / r.abs().max().clamp_min(1e-30)
        assert err < 2e-5, (name, norm, err.item())
