"""Pinhole camera and the Scene container every loader returns."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch


@dataclass
class Camera:
    """A pinhole camera, OpenCV/COLMAP convention (x right, y down, z forward).

    `world_to_camera` is a 4x4 float32 matrix; intrinsics are in pixels of an image of
    `width` x `height`. Pixel centres sit at integer + 0.5 in these intrinsics (COLMAP);
    the rasterizer converts to INRIA pixel coordinates (centres at integers).
    """

    world_to_camera: torch.Tensor
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    name: str = ""

    def __post_init__(self):
        w2c = torch.as_tensor(self.world_to_camera, dtype=torch.float32)
        if w2c.shape != (4, 4):
            raise ValueError(f"Camera {self.name!r}: world_to_camera must be 4x4, got {tuple(w2c.shape)}")
        if not torch.isfinite(w2c).all():
            raise ValueError(f"Camera {self.name!r}: world_to_camera has non-finite entries")
        if self.width <= 0 or self.height <= 0 or self.fx <= 0 or self.fy <= 0:
            raise ValueError(
                f"Camera {self.name!r}: need positive width/height/fx/fy, got "
                f"{self.width}x{self.height}, fx={self.fx}, fy={self.fy}"
            )
        self.world_to_camera = w2c
        self.width, self.height = int(self.width), int(self.height)
        self.fx, self.fy, self.cx, self.cy = map(float, (self.fx, self.fy, self.cx, self.cy))

    @property
    def center(self) -> torch.Tensor:
        """Camera centre in world coordinates."""
        r, t = self.world_to_camera[:3, :3], self.world_to_camera[:3, 3]
        return -r.T @ t

    @property
    def tan_half_fov(self) -> tuple[float, float]:
        return self.width / (2 * self.fx), self.height / (2 * self.fy)

    @property
    def fov_x(self) -> float:
        return 2 * math.atan(self.width / (2 * self.fx))

    @property
    def fov_y(self) -> float:
        return 2 * math.atan(self.height / (2 * self.fy))

    def to(self, device) -> "Camera":
        return replace(self, world_to_camera=self.world_to_camera.to(device))

    def scaled(self, factor: float) -> "Camera":
        """The same camera for an image resized by `factor` (e.g. 1/8 for a downscale of 8)."""
        w, h = max(1, round(self.width * factor)), max(1, round(self.height * factor))
        sx, sy = w / self.width, h / self.height
        return replace(self, fx=self.fx * sx, fy=self.fy * sy, cx=self.cx * sx, cy=self.cy * sy,
                       width=w, height=h)


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> torch.Tensor:
    """World-to-camera matrix (OpenCV axes) of a camera at `eye` looking at `target`."""
    eye, target, up = (torch.as_tensor(v, dtype=torch.float64) for v in (eye, target, up))
    z = target - eye
    z = z / z.norm()
    x = torch.linalg.cross(z, up)
    if x.norm() < 1e-8:  # looking along `up`: any perpendicular will do
        x = torch.linalg.cross(z, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    x = x / x.norm()
    y = torch.linalg.cross(z, x)
    r = torch.stack([x, y, z])  # rows: camera axes in world coordinates
    w2c = torch.eye(4, dtype=torch.float64)
    w2c[:3, :3] = r
    w2c[:3, 3] = -r @ eye
    return w2c.float()


@dataclass
class Scene:
    """Cameras and images of one scene, split into train and test.

    Images are float32 [3, H, W] in [0, 1] (already composited on `background`).
    `points` / `point_colors` ([P, 3], colours in [0, 1]) are optional SfM points for init.
    `extent` is the 3DGS scene radius: 1.1 x the largest distance of a camera centre from
    their mean; learning rates and densification thresholds scale with it.
    `only`: "train" or "test" when the loader read that split alone (the other is empty, and
    `extent` comes from the loaded cameras), None for both.
    """

    train_cameras: list[Camera]
    train_images: list[torch.Tensor]
    test_cameras: list[Camera]
    test_images: list[torch.Tensor]
    points: torch.Tensor | None = None
    point_colors: torch.Tensor | None = None
    extent: float = 0.0
    background: tuple[float, float, float] = (0.0, 0.0, 0.0)
    name: str = ""
    meta: dict = field(default_factory=dict)
    only: str | None = None
    train_masks: list | None = None  # data.masks: [1, H, W] per training view (gsexp/scene/masks.py)

    def __post_init__(self):
        if len(self.train_cameras) != len(self.train_images):
            raise ValueError("Scene: train_cameras and train_images differ in length")
        if len(self.test_cameras) != len(self.test_images):
            raise ValueError("Scene: test_cameras and test_images differ in length")
        if not self.train_cameras and self.only != "test":
            raise ValueError(f"Scene {self.name!r}: no training views")
        cameras = self.train_cameras or self.test_cameras  # 3DGS: the training cameras alone
        if self.extent <= 0:
            self.extent = camera_extent(cameras) if cameras else 1.0


def camera_extent(cameras: list[Camera]) -> float:
    """3DGS `cameras_extent`: 1.1 x max distance of a camera centre from the mean centre."""
    centers = torch.stack([c.center for c in cameras])
    radius = (centers - centers.mean(0)).norm(dim=1).max().item()
    return 1.1 * radius if radius > 0 else 1.0  # one camera: no spread to measure


def framing_camera(points: torch.Tensor, width: int, height: int, *, view_dir=(0.0, 0.0, 1.0),
                   up=(0.0, -1.0, 0.0), fov_deg: float = 53.0) -> Camera:
    """A camera looking along `view_dir` at the bounding box of `points`, far enough back
    that the box's bounding sphere fits the narrower field of view."""
    lo, hi = points.min(0).values, points.max(0).values
    center, radius = (lo + hi) / 2, ((hi - lo) / 2).norm().item()
    focal = 0.5 * min(width, height) / math.tan(math.radians(fov_deg) / 2)
    distance = radius * focal / (0.5 * min(width, height))
    eye = center - distance * torch.nn.functional.normalize(torch.as_tensor(view_dir, dtype=torch.float32), dim=0)
    return Camera(look_at(eye.tolist(), center.tolist(), up), focal, focal, width / 2, height / 2,
                  width, height, name="framing")
