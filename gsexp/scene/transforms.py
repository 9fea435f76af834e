"""instant-ngp / nerfstudio scenes: one transforms.json with all frames."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

from gsexp.scene.camera import Camera, Scene
from gsexp.scene.images import (
    IMAGE_EXTENSIONS, check_downscale, downscaled_size, fit_camera, load_views, opengl_to_w2c,
    read_image, read_json, resize_area, split_every,
)

INTRINSIC_KEYS = ("fl_x", "fl_y", "cx", "cy", "w", "h", "camera_angle_x", "camera_angle_y")
DISTORTION_KEYS = ("k1", "k2", "k3", "k4", "p1", "p2")


def load_transforms(path, *, downscale=1, background=(1.0, 1.0, 1.0), test_every=8, only=None) -> Scene:
    """Load `path`/transforms.json (or `path` itself if it is a .json file).

    Intrinsics may be global or per frame (per frame wins); frames whose image is missing are
    skipped with one warning. Frame i of the loaded ones is a test view when i % test_every == 0
    (test_every=0: no test views). only="train" | "test": that split's images alone (images.load_views).
    """
    check_downscale(downscale)
    path = Path(path)
    file = path if path.suffix == ".json" else path / "transforms.json"
    if not file.is_file():
        raise FileNotFoundError(f"{file} not found: an instant-ngp/nerfstudio scene needs a transforms.json "
                                "(for transforms_train.json use load_scene('blender', ...))")
    data = read_json(file)
    frames = data.get("frames")
    if not isinstance(frames, list) or not frames:
        raise ValueError(f"{file}: missing or empty 'frames' list")

    found, missing = [], []
    for k, frame in enumerate(frames):
        for key in ("file_path", "transform_matrix"):
            if key not in frame:
                raise ValueError(f"frame {k} of {file}: missing key '{key}'")
        img_path = _find_image(file.parent / frame["file_path"])
        if img_path is None:
            missing.append(frame["file_path"])
        else:
            found.append((k, img_path))

    def load(item):
        k, img_path = item
        frame, where = frames[k], f"frame {k} of {file}"
        img = read_image(img_path, background, hint=f"file_path of {where}")
        # Per-frame values override the global ones.
        intr = {key: frame.get(key, data.get(key)) for key in INTRINSIC_KEYS}
        cam = _camera(intr, img, opengl_to_w2c(frame["transform_matrix"], where), where, img_path.stem)
        w2, h2 = downscaled_size(cam.width, cam.height, downscale)
        return fit_camera(cam, w2, h2), resize_area(img, w2, h2)

    if missing:
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        msg = f"{len(missing)} of {len(frames)} frames whose image is missing: {shown} (in {file.parent})"
        if not found:
            raise FileNotFoundError(f"{file}: all {msg}; check file_path entries and the image folder")
        warnings.warn(f"load_transforms: skipped {msg}")
    views = load_views(load, found, test_every, only)
    if not split_every(len(found), test_every)[0]:
        raise ValueError(f"{file}: with test_every={test_every} all {len(found)} frames are test "
                         "views; raise test_every or pass test_every=0")
    if any(float(f.get(key, data.get(key)) or 0) != 0 for f in frames for key in DISTORTION_KEYS):
        warnings.warn(f"load_transforms: {file} has lens distortion (k1/k2/p1/p2...); it is ignored, "
                      "so use undistorted images for accurate results")

    return Scene(*views, background=tuple(background), name=file.parent.name, only=only,
                 meta={"kind": "transforms", "path": str(file), "downscale": downscale})


def _find_image(p: Path) -> Path | None:
    """`file_path` may omit the extension (instant-ngp exports often do)."""
    if p.is_file():
        return p
    for ext in IMAGE_EXTENSIONS:
        q = p.with_name(p.name + ext)
        if q.is_file():
            return q
    return None


def _camera(intr: dict, img, w2c, where: str, name: str) -> Camera:
    h_img, w_img = img.shape[-2:]
    w, h = int(intr["w"] or w_img), int(intr["h"] or h_img)
    if (w, h) != (w_img, h_img):
        # Stored w/h describe the full-res capture; the image may already be downscaled.
        if abs(w / w_img - h / h_img) > 0.01 * w / w_img:
            raise ValueError(f"{where}: image is {w_img}x{h_img} but w/h say {w}x{h} (other aspect ratio)")
    fx, fy = intr["fl_x"], intr["fl_y"]
    if fx is None and intr["camera_angle_x"] is not None:
        fx = 0.5 * w / math.tan(0.5 * float(intr["camera_angle_x"]))
    if fy is None and intr["camera_angle_y"] is not None:
        fy = 0.5 * h / math.tan(0.5 * float(intr["camera_angle_y"]))
    if fx is None and fy is None:
        raise ValueError(f"{where}: missing key 'fl_x' (or 'camera_angle_x'), globally or in the frame")
    fx, fy = float(fx if fx is not None else fy), float(fy if fy is not None else fx)
    cx = float(intr["cx"]) if intr["cx"] is not None else w / 2
    cy = float(intr["cy"]) if intr["cy"] is not None else h / 2
    return fit_camera(Camera(w2c, fx, fy, cx, cy, w, h, name=name), w_img, h_img)
