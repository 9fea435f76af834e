"""Training masks (data.masks): which pixels of each training view the loss sees. A folder of
images named as the views' images (any image extension), white = use, black = leave out (people,
sky, the photographer's shadow). Read as greyscale, area-resized to the view's size, so a mask
pixel is the used fraction of it. Where the colmap loader undistorted the views, the masks go
through the same warp first (cached beside the undistorted images)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from gsexp.scene.images import resize_area
from gsexp.scene.undistort import cached_masks

EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")


def mask_file(folder: Path, name: str) -> Path | None:
    for ext in EXTENSIONS:
        for candidate in (folder / f"{name}{ext}", folder / f"{name}{ext.upper()}"):
            if candidate.is_file():
                return candidate
    return None


def load_masks(folder, scene) -> list[torch.Tensor]:
    """One [1, H, W] mask in [0, 1] per training view of `scene`, in its order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"config key 'data.masks': {folder} is not a folder; give the folder of masks "
                                "named as the training images (white = use)")
    files = {}
    for cam in scene.train_cameras:
        path = mask_file(folder, cam.name)
        if path is None:
            raise FileNotFoundError(f"config key 'data.masks': no mask for training view '{cam.name}' in {folder} "
                                    f"(expected {cam.name}.png or another image type); every training view needs one")
        files[cam.name] = path
    if scene.meta.get("undistorted"):
        if not scene.meta.get("undistortion"):
            raise ValueError("config key 'data.masks': these views were undistorted and the masks would not line "
                             "up; prepare the scene with python -m gsexp.prepare --masks, or use data.undistort=false")
        files = cached_masks(files, scene.meta["undistortion"])  # the masks of the undistorted views
    masks = []
    for cam in scene.train_cameras:
        with Image.open(files[cam.name]) as im:
            arr = np.asarray(im.convert("L"), dtype=np.float32) / 255.0
        masks.append(resize_area(torch.from_numpy(arr)[None], cam.width, cam.height))
    if not any(float(m.sum()) > 0 for m in masks):
        raise ValueError(f"config key 'data.masks': every mask in {folder} is black, so no pixel would train; "
                         "white marks the pixels to use")
    return masks
