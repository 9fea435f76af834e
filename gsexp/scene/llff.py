"""LLFF scenes: poses_bounds.npy + images[_N]/ (+ optional COLMAP sparse/0/points3D)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gsexp.scene.camera import Camera, Scene
from gsexp.scene.colmap import read_points3d
from gsexp.scene.images import (
    check_downscale, downscaled_size, load_views, read_image, resize_area,
)

EXTENSIONS = (".png", ".jpg", ".jpeg")


def load_llff(path, *, downscale=8, test_every=8, only=None) -> Scene:
    """Load an LLFF scene; images sorted by name, i % test_every == 0 are test views (only="train"
    | "test": that split's images alone, see images.load_views).

    Images come from images_{downscale} if present, else images/ resized by 1/downscale.
    poses_bounds.npy (LLFF's imgs2poses) is in COLMAP's world frame, so SfM points from
    sparse/0/points3D.{bin,txt} are used as they are.
    """
    check_downscale(downscale)
    root = Path(path)
    file = root / "poses_bounds.npy"
    if not file.is_file():
        raise FileNotFoundError(f"{file} not found: an LLFF scene needs poses_bounds.npy "
                                "(for a COLMAP folder use load_scene('colmap', ...))")
    arr = np.load(file)
    if arr.ndim != 2 or arr.shape[1] != 17:
        raise ValueError(f"{file}: expected an N x 17 array (3x5 pose/hwf + 2 bounds), got {arr.shape}")
    poses = arr[:, :15].reshape(-1, 3, 5).astype(np.float64)
    bounds = arr[:, 15:]

    image_dir, factor = root / f"images_{downscale}", 1
    if not image_dir.is_dir():
        image_dir, factor = root / "images", downscale
    if not image_dir.is_dir():
        raise FileNotFoundError(f"neither {root / f'images_{downscale}'} nor {root / 'images'} exists")
    files = sorted(p for p in image_dir.iterdir() if p.suffix.lower() in EXTENSIONS)
    if len(files) != len(poses):
        raise ValueError(f"{image_dir} has {len(files)} images but {file} has {len(poses)} poses; "
                         "they must match one to one (sorted by name)")

    def load(k):
        pose, f = poses[k], files[k]
        img = read_image(f)
        h, w = img.shape[-2:]
        if factor != 1:
            w, h = downscaled_size(w, h, factor)
            img = resize_area(img, w, h)
        # LLFF columns are (down, right, back); OpenCV c2w columns are (right, down, forward).
        c2w = np.eye(4)
        c2w[:3, :3] = np.stack([pose[:, 1], pose[:, 0], -pose[:, 2]], axis=1)
        c2w[:3, 3] = pose[:, 3]
        hwf_h, hwf_w, focal = pose[:, 4]
        if abs(w / hwf_w - h / hwf_h) > 0.01 * w / hwf_w:
            raise ValueError(f"{f}: image is {w}x{h} but poses_bounds.npy says {hwf_w:g}x{hwf_h:g}")
        w2c = torch.from_numpy(np.linalg.inv(c2w)).float()
        cam = Camera(w2c, focal * w / hwf_w, focal * h / hwf_h, w / 2, h / 2, w, h, name=f.stem)
        return cam, img

    views = load_views(load, list(range(len(poses))), test_every, only)

    points = colors = None
    for name in ("points3D.bin", "points3D.txt"):
        if (root / "sparse" / "0" / name).is_file():
            xyz, rgb = read_points3d(root / "sparse" / "0" / name)
            points, colors = torch.from_numpy(xyz), torch.from_numpy(rgb.astype(np.float32) / 255.0)
            break

    return Scene(*views, points=points, point_colors=colors, name=root.name, only=only,
                 meta={"kind": "llff", "path": str(root), "downscale": downscale,
                       "near": float(bounds.min()), "far": float(bounds.max())})
