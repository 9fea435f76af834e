"""pose_opt (issue 41): a pose correction per training camera, rendered by moving the Gaussians;
the moved Gaussians render what the corrected camera sees, and the correction recovers a known
perturbation of the synthetic scene's cameras."""
import dataclasses
import math

import torch

from gsexp.gaussians import Gaussians
from gsexp.render import make_settings, render
from gsexp.scene import load_scene
from gsexp.train.pose import PoseCorrection, rotation

SETTINGS = make_settings("torch")


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
    pose = PoseCorrection(1, "cpu")
    with torch.no_grad():
        pose.delta[0] = torch.tensor([0.02, -0.03, 0.01, 0.05, -0.02, 0.03])
    cam = s.train_cameras[0]
    moved = render(pose.apply(g, 0, cam), cam, SETTINGS).image
    truth = render(g, corrected(cam, pose.delta[0].detach()), SETTINGS).image
    assert (moved - truth).abs().max() < 1e-4
    assert (moved - render(g, cam, SETTINGS).image).abs().max() > 0.05  # the correction does move the view


def test_recovers_a_known_perturbation_of_the_cameras():
    s, g = scene()
    views = [0, 1]
    targets = [render(g, s.train_cameras[v], SETTINGS).image for v in views]
    perturb = [torch.tensor([0.03, -0.02, 0.02, 0.04, 0.03, -0.03]), torch.tensor([-0.02, 0.03, -0.01, -0.03, 0.02, 0.04])]
    cams = [corrected(s.train_cameras[v], p) for v, p in zip(views, perturb)]  # what SfM got wrong
    pose = PoseCorrection(2, "cpu", lr=2e-3, reg=0.0)
    start = [(render(g, c, SETTINGS).image - t).abs().mean().item() for c, t in zip(cams, targets)]
    for i in range(240):
        v = i % 2
        loss = (render(pose.apply(g, v, cams[v]), cams[v], SETTINGS).image - targets[v]).abs().mean()
        loss.backward()
        pose.step()
    end = [(render(pose.apply(g, v, cams[v]), cams[v], SETTINGS).image - targets[v]).abs().mean().item() for v in (0, 1)]
    assert all(e < 0.2 * s0 for e, s0 in zip(end, start)), (start, end)
    for v in (0, 1):  # corrected camera = true camera: dT (P w2c) = w2c
        fixed = corrected(cams[v], pose.delta[v].detach()).world_to_camera
        true = s.train_cameras[v].world_to_camera
        rot_err = torch.linalg.matrix_norm(fixed[:3, :3] - true[:3, :3]).item()
        rot_was = torch.linalg.matrix_norm(cams[v].world_to_camera[:3, :3] - true[:3, :3]).item()
        assert rot_err < 0.3 * rot_was and (fixed[:3, 3] - true[:3, 3]).norm() < 0.3 * (cams[v].world_to_camera[:3, 3] - true[:3, 3]).norm()
    summary = pose.summary()
    assert 0 < summary["pose_mean_rotation_deg"] < 5 and not math.isnan(summary["pose_mean_translation"])
