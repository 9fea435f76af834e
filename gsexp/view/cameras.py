"""Between the browser's camera (viser: a camera-to-world pose, OpenCV axes, vertical fov) and
gsexp's Camera (a world-to-camera matrix, OpenCV axes, focal lengths in pixels)."""
from __future__ import annotations

import math

import numpy as np
import torch

from gsexp.scene import Camera


def resolution(aspect: float, height: int) -> tuple[int, int]:
    """(width, height) of a render `height` pixels tall at the browser's aspect ratio."""
    height = max(8, int(height))
    return max(8, round(height * aspect)), height


def camera_from_pose(wxyz, position, fov_y: float, width: int, height: int) -> Camera:
    """A Camera at a viser pose: R = rotation of wxyz (camera to world), t = position."""
    w, x, y, z = (float(v) for v in wxyz)
    rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                    [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                    [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    w2c = np.eye(4)
    w2c[:3, :3] = rot.T
    w2c[:3, 3] = -rot.T @ np.asarray(position, dtype=np.float64)
    focal = 0.5 * height / math.tan(fov_y / 2)
    return Camera(torch.from_numpy(w2c).float(), focal, focal, width / 2, height / 2, width, height,
                  name="viewer")


def pose_of(camera: Camera) -> tuple[np.ndarray, np.ndarray]:
    """(wxyz, position) of a Camera's camera-to-world pose, as viser takes it."""
    c2w = torch.linalg.inv(camera.world_to_camera.double().cpu()).numpy()
    return quaternion_of(c2w[:3, :3]), c2w[:3, 3]


def quaternion_of(rot: np.ndarray) -> np.ndarray:
    """wxyz of a rotation matrix (Shepperd's method: the largest diagonal term keeps it stable)."""
    m = rot
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2 * math.sqrt(1 + trace)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2 * math.sqrt(max(1 + m[i, i] - m[j, j] - m[k, k], 1e-12))
        q = [0.0] * 4
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i], q[1 + j], q[1 + k] = 0.25 * s, (m[j, i] + m[i, j]) / s, (m[k, i] + m[i, k]) / s
    q = np.array(q)
    return q / np.linalg.norm(q)


def world_up(cameras: list[Camera]) -> np.ndarray:
    """The scene's up: the training cameras' mean up axis (-y in OpenCV), as viewers guess it."""
    if not cameras:
        return np.array([0.0, 0.0, 1.0])
    ups = [-torch.linalg.inv(c.world_to_camera.double())[:3, 1].numpy() for c in cameras]
    up = np.mean(ups, axis=0)
    norm = np.linalg.norm(up)
    return up / norm if norm > 1e-6 else np.array([0.0, 0.0, 1.0])


def start_view(gaussians, cameras: list[Camera], up=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position, look_at, up) to open on: behind and above the first training camera, far
    enough that its own frustum is small and the others are in view, looking at the scene's
    core; without cameras, from 20 degrees above the core's horizon when `up` (a unit 3-vector)
    is given, else a camera framing the core of the Gaussians. `up` overrides the cameras' up."""
    from gsexp.bench.cameras import core_camera, orbit_cameras

    means = gaussians.means.detach().float().cpu()
    target = means.median(0).values.double().numpy() if len(means) else np.zeros(3)
    up = None if up is None else np.asarray(up, dtype=np.float64)
    if cameras:
        up = world_up(cameras) if up is None else up
        back = cameras[0].center.double().numpy() - target
        return target + 1.6 * back + 0.3 * np.linalg.norm(back) * up, target, up
    if up is not None and len(means):
        (cam,), info = orbit_cameras(means, 1, 64, 64, up=torch.from_numpy(up))
        return cam.center.double().numpy(), np.array(info["centre"]), up
    cam = core_camera(gaussians, 64, 64)
    c2w = torch.linalg.inv(cam.world_to_camera.double()).numpy()
    return c2w[:3, 3], target, -c2w[:3, 1]
