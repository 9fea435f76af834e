"""NeRF-synthetic (Blender) scenes: transforms_{train,val,test}.json + RGBA PNGs."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

from gsexp.scene.camera import Camera, Scene
from gsexp.scene.images import (
    check_downscale, check_only, downscaled_size, fit_camera, opengl_to_w2c, parallel_map, read_image, read_json,
    resize_area,
)

OPTIONAL_SPLITS = ("val",)  # lego and friends ship without transforms_val.json in some copies


def load_blender(path, *, downscale=1, background=(1.0, 1.0, 1.0),
                 splits=None, test_stride: int = 1, only=None) -> Scene:
    """Load a NeRF-synthetic scene.

    `splits` maps the Scene's "train"/"test" to the json files used for them, by default
    {"train": ("train",), "test": ("test",)}; e.g. {"train": ("train", "val"), ...} also trains
    on val. A missing transforms_val.json is skipped with a warning, any other one raises.
    `test_stride` keeps every k-th test view (quick studies; the published protocol uses all).
    only="train" | "test" reads that split alone; the other comes back empty.
    """
    if not isinstance(test_stride, int) or test_stride < 1:
        raise ValueError(f"load_blender: test_stride must be an integer >= 1, got {test_stride!r}")
    check_downscale(downscale)
    root = Path(path)
    splits = splits or {"train": ("train",), "test": ("test",)}
    unknown = set(splits) - {"train", "test"}
    if unknown:
        raise ValueError(f"load_blender: splits keys must be 'train'/'test', got {sorted(unknown)}")
    out = {}
    check_only(only)
    for role in ("train", "test"):
        names = splits.get(role, ()) if only in (None, role) else ()
        names = (names,) if isinstance(names, str) else tuple(names)
        cams, imgs = [], []
        for name in names:
            file = root / f"transforms_{name}.json"
            if name in OPTIONAL_SPLITS and not file.is_file():
                warnings.warn(f"load_blender: {file} not found; skipping the '{name}' split")
                continue
            c, i = _load_split(file, downscale, background, test_stride if role == "test" else 1)
            cams += c
            imgs += i
        out[role] = (cams, imgs)
    return Scene(*out["train"], *out["test"], background=tuple(background), name=root.name, only=only,
                 meta={"kind": "blender", "path": str(root), "downscale": downscale,
                       "random_radius": 1.3})  # 3DGS's random-init cube for NeRF-synthetic scenes


def _load_split(file: Path, downscale, background, stride: int = 1):
    if not file.is_file():
        hint = " (found transforms.json: use load_scene('transforms', ...))" \
            if (file.parent / "transforms.json").is_file() else ""
        raise FileNotFoundError(
            f"{file} not found: a Blender/NeRF-synthetic scene needs transforms_train.json and "
            f"transforms_test.json in {file.parent}{hint}")
    data = read_json(file)
    if "camera_angle_x" not in data:
        raise ValueError(f"{file}: missing key 'camera_angle_x' (horizontal field of view, radians)")
    frames = data.get("frames")
    if not isinstance(frames, list) or not frames:
        raise ValueError(f"{file}: missing or empty 'frames' list")
    frames = frames[::stride]
    angle_x = float(data["camera_angle_x"])

    def load(k):
        frame, where = frames[k], f"frame {k} of {file}"
        for key in ("file_path", "transform_matrix"):
            if key not in frame:
                raise ValueError(f"{where}: missing key '{key}'")
        img_path = file.parent / frame["file_path"]
        if img_path.suffix.lower() not in (".png", ".jpg", ".jpeg"):
            img_path = img_path.with_name(img_path.name + ".png")  # Blender json omits ".png"
        img = read_image(img_path, background, hint=f"file_path of {where}")
        h, w = img.shape[-2:]
        fx = 0.5 * w / math.tan(0.5 * angle_x)
        cam = Camera(opengl_to_w2c(frame["transform_matrix"], where), fx, fx, w / 2, h / 2, w, h,
                     name=img_path.stem)
        w2, h2 = downscaled_size(w, h, downscale)
        return fit_camera(cam, w2, h2), resize_area(img, w2, h2)

    loaded = parallel_map(load, range(len(frames)))
    return [c for c, _ in loaded], [i for _, i in loaded]
