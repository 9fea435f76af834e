"""Helpers shared by the scene loaders: images (read, composite alpha, area-downscale), JSON,
splits and the OpenGL -> OpenCV pose conversion."""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from gsexp.scene.camera import Camera

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".PNG", ".JPG", ".JPEG")


def read_image(path, background=(0.0, 0.0, 0.0), *, hint: str = "") -> torch.Tensor:
    """Float32 [3, H, W] in [0, 1]; an alpha channel is composited on `background`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"image not found: {path}" + (f" ({hint})" if hint else "")
            + "; check that the dataset was extracted completely and the paths are right"
        )
    with Image.open(path) as im:
        if im.mode == "P" and "transparency" in im.info:
            im = im.convert("RGBA")
        # 16-bit greyscale PNGs open as I;16 / I, which convert('RGB') would clip to 255.
        if im.mode in ("I;16", "I"):
            arr = np.asarray(im, dtype=np.float32) / 65535.0
            return torch.from_numpy(arr).expand(3, *arr.shape).clone()
        has_alpha = im.mode in ("RGBA", "LA", "PA")
        arr = np.asarray(im.convert("RGBA" if has_alpha else "RGB"), dtype=np.float32) / 255.0
    img = torch.from_numpy(arr).permute(2, 0, 1).contiguous()
    if has_alpha:
        rgb, alpha = img[:3], img[3:4]
        bg = torch.tensor(background, dtype=torch.float32).view(3, 1, 1)
        img = rgb * alpha + bg * (1.0 - alpha)
    return img


def parallel_map(fn, items) -> list:
    """[fn(x) for x in items] on a few threads: PNG/JPEG decoding releases the GIL.

    The first failing item (in order) raises its own exception."""
    items = list(items)
    workers = min(8, os.cpu_count() or 1, max(1, len(items)))
    if workers == 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))


def resize_area(img: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """Area (box-average) resize of a [3, H, W] image; identity if the size already matches."""
    if img.shape[-2:] == (height, width):
        return img
    return F.interpolate(img[None], size=(height, width), mode="area")[0].clamp_(0.0, 1.0)


def downscaled_size(width: int, height: int, downscale: float) -> tuple[int, int]:
    """Image size after dividing by `downscale` (rounded like Camera.scaled)."""
    check_downscale(downscale)
    return max(1, round(width / downscale)), max(1, round(height / downscale))


def check_downscale(downscale) -> None:
    if not downscale or downscale < 1:
        raise ValueError(f"downscale must be >= 1 (an image size divisor), got {downscale!r}")


def fit_camera(cam: Camera, width: int, height: int) -> Camera:
    """The camera rescaled so its intrinsics match an image of width x height."""
    sx, sy = width / cam.width, height / cam.height
    return replace(cam, fx=cam.fx * sx, fy=cam.fy * sy, cx=cam.cx * sx, cy=cam.cy * sy,
                   width=width, height=height)


def split_every(n: int, test_every) -> tuple[list[int], list[int]]:
    """(train, test) indices: i % test_every == 0 is test (the 3DGS/LLFF hold-out); 0 = none."""
    is_test = [bool(test_every) and i % test_every == 0 for i in range(n)]
    return [i for i in range(n) if not is_test[i]], [i for i in range(n) if is_test[i]]


def load_views(load, items: list, test_every, only: str | None = None) -> tuple[list, list, list, list]:
    """(train cameras, train images, test cameras, test images) from load(item) -> (camera, image),
    item i a test view when i % test_every == 0. only="train" | "test" reads that split's images
    alone and leaves the other split empty: evaluating test views needs no training image."""
    check_only(only)
    train, test = split_every(len(items), test_every)
    wanted = sorted((train if only != "test" else []) + (test if only != "train" else []))
    loaded = dict(zip(wanted, parallel_map(load, [items[i] for i in wanted])))

    def pick(indices):
        views = [loaded[i] for i in indices if i in loaded]
        return [c for c, _ in views], [img for _, img in views]
    return (*pick(train), *pick(test))


def check_only(only) -> None:
    if only not in (None, "train", "test"):
        raise ValueError(f"only must be 'train', 'test' or None (both splits), got {only!r}")


def read_json(path) -> dict:
    """Parse a JSON file; missing file / bad syntax raise errors that name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; is this the right scene folder / loader?")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}; fix or "
            "re-export the file"
        ) from e
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}")
    return data


def opengl_to_w2c(c2w, where: str) -> torch.Tensor:
    """OpenGL/Blender camera-to-world (x right, y up, z back) -> OpenCV world-to-camera."""
    try:
        m = np.asarray(c2w, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: transform_matrix is not a numeric matrix") from e
    if m.shape == (3, 4):
        m = np.vstack([m, [0.0, 0.0, 0.0, 1.0]])
    if m.shape != (4, 4) or not np.isfinite(m).all():
        raise ValueError(f"{where}: transform_matrix must be a finite 4x4 (or 3x4) matrix, "
                         f"got shape {m.shape}")
    m = m.copy()
    m[:3, 1:3] *= -1.0  # y up -> down, z back -> forward
    return torch.from_numpy(np.linalg.inv(m)).float()
