"""COLMAP scenes: sparse/0/{cameras,images,points3D}.{bin,txt} + images/ via pycolmap."""
from __future__ import annotations

import re
import struct
import warnings
from pathlib import Path

import numpy as np
import torch

from gsexp.scene.camera import Camera, Scene
from gsexp.scene.images import (
    check_downscale, downscaled_size, fit_camera, load_views, read_image, resize_area,
)
from gsexp.scene.undistort import (
    PINHOLE_MODELS, UNDISTORTABLE_MODELS, cached_undistortion, import_pycolmap, registered_images,
)

DISTORTED_MODELS = ("SIMPLE_RADIAL", "RADIAL", "OPENCV")  # loadable with undistort=False (ignored)
CACHE = Path("outputs") / "cache"  # the default of conf/paths (relative to the working folder)


def load_colmap(path, *, downscale=1, images=None, test_every=8, undistort=True, cache=CACHE,
                only=None) -> Scene:
    """Load a COLMAP reconstruction; images sorted by name, i % test_every == 0 are test views
    (only="train" | "test": that split's images alone, see images.load_views).

    Images come from `images` (a folder name under `path`) if given, else `images_{downscale}`
    when it exists (already downscaled), else `images/` resized by 1/downscale.
    Distorted cameras are undistorted through pycolmap (undistort=True) into `cache`/undistorted/,
    made once per model and image set and never inside `path`; undistort=False ignores the
    distortion of SIMPLE_RADIAL, RADIAL and OPENCV cameras, with a warning.
    """
    pycolmap = import_pycolmap()  # only this loader needs it

    check_downscale(downscale)
    root = Path(path)
    sparse = _sparse_dir(root)
    rec = pycolmap.Reconstruction(str(sparse))

    if images is None:
        images = f"images_{downscale}" if downscale > 1 and (root / f"images_{downscale}").is_dir() \
            else "images"
    image_dir = root / images
    if not image_dir.is_dir():
        raise FileNotFoundError(f"image folder {image_dir} not found; "
                                f"pass images=<folder name under {root}>")
    # A folder named images_N is taken as already downscaled by N; the rest is resized here.
    prescaled = int(images[7:]) if re.fullmatch(r"images_\d+", images) else 1
    factor = downscale / prescaled
    if factor < 1:
        raise ValueError(f"{image_dir} holds images downscaled by {prescaled}, "
                         f"more than downscale={downscale}")

    registered = registered_images(rec)
    models = {im.camera.model.name for im in registered}
    check_models(models, sparse, undistort)
    source = {}  # undistorted image name -> the user's image name
    undistortion = None  # where the undistorted scene came from, for data.masks (masks.load_masks)
    if undistort and models - set(PINHOLE_MODELS):
        entry, source = cached_undistortion(sparse, image_dir, Path(cache) / "undistorted")
        undistortion = {"sparse": str(sparse), "images": str(image_dir), "entry": str(entry)}
        rec, image_dir = pycolmap.Reconstruction(str(entry / "sparse" / "0")), entry / "images"
        # Sorted by the source names, so the test views are those of undistort=False.
        registered = sorted(registered_images(rec), key=lambda im: source.get(im.name, im.name))
    named = [(im.name, _camera(im, source.get(im.name, im.name))) for im in registered]

    def load(item):
        name, cam = item
        img = read_image(image_dir / name, hint=f"image '{name}' of {sparse}")
        h, w = img.shape[-2:]
        if factor != 1:
            w, h = downscaled_size(w, h, factor)
            img = resize_area(img, w, h)
        return fit_camera(cam, w, h), img  # fit also covers images/ smaller than COLMAP's size

    if not named:
        raise ValueError(f"{sparse}: the reconstruction has no registered images")
    views = load_views(load, named, test_every, only)
    if not undistort and models & set(DISTORTED_MODELS):
        warnings.warn(f"load_colmap: {sparse} uses distorted camera model(s) "
                      f"{sorted(models & set(DISTORTED_MODELS))}; "
                      "the distortion is ignored (undistort=False). Use undistort=True (data.undistort=true) "
                      "for exact cameras")

    xyz = np.array([p.xyz for p in rec.points3D.values()], dtype=np.float32).reshape(-1, 3)
    rgb = np.array([p.color for p in rec.points3D.values()], dtype=np.float32).reshape(-1, 3) / 255.0
    return Scene(*views, points=torch.from_numpy(xyz), point_colors=torch.from_numpy(rgb), name=root.name, only=only,
                 meta={"kind": "colmap", "path": str(root), "downscale": downscale, "images": images,
                       "undistorted": bool(source), "undistortion": undistortion})


def check_models(models: set, sparse: Path, undistort: bool) -> None:
    usable = PINHOLE_MODELS + (UNDISTORTABLE_MODELS if undistort else DISTORTED_MODELS)
    unsupported = models - set(usable)
    if unsupported:
        hint = "" if undistort else "; with undistort=True (data.undistort=true) gsexp undistorts them"
        raise ValueError(f"{sparse}: camera model(s) {sorted(unsupported)} not supported (only "
                         f"{', '.join(usable)}{hint}); run colmap image_undistorter")


def _camera(im, name: str) -> Camera:
    c = im.camera
    pose = im.cam_from_world
    pose = pose() if callable(pose) else pose  # a method in pycolmap 4.x, a property in older ones
    w2c = torch.eye(4)
    w2c[:3] = torch.from_numpy(np.asarray(pose.matrix(), dtype=np.float64)).float()
    return Camera(w2c, c.focal_length_x, c.focal_length_y, c.principal_point_x, c.principal_point_y,
                  c.width, c.height, name=Path(name).stem)


def _sparse_dir(root: Path) -> Path:
    """sparse/0 (or sparse/), checked before pycolmap so the error can say what to do."""
    hint = ""
    if (root / "poses_bounds.npy").is_file():
        hint = (f". {root} has poses_bounds.npy: it is an LLFF scene, load it with "
                f"load_scene('llff', '{root}') (data=llff)")
    sparse = root / "sparse" / "0"
    if not sparse.is_dir() and (root / "sparse").is_dir():
        sparse = root / "sparse"
    if not sparse.is_dir():
        raise FileNotFoundError(f"{root / 'sparse' / '0'} not found: a COLMAP scene needs "
                                "sparse/0/{cameras,images,points3D}.bin (or .txt)" + hint)
    for what in ("cameras", "images"):
        if not (sparse / f"{what}.bin").is_file() and not (sparse / f"{what}.txt").is_file():
            raise FileNotFoundError(f"{sparse / (what + '.bin')} not found (nor {what}.txt): the "
                                    f"COLMAP reconstruction is incomplete{hint}")
    return sparse


def read_points3d(path) -> tuple[np.ndarray, np.ndarray]:
    """xyz [P,3] float32 and rgb [P,3] uint8 from a COLMAP points3D.bin or points3D.txt.

    A reader of its own because pycolmap.Reconstruction refuses folders without images.bin.
    """
    path = Path(path)
    if path.suffix == ".txt":
        rows = [ln.split()[:7] for ln in path.read_text().splitlines() if ln.strip() and ln[0] != "#"]
        arr = np.array(rows, dtype=np.float64).reshape(-1, 7)
        return arr[:, 1:4].astype(np.float32), arr[:, 4:7].astype(np.uint8)
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    xyz, rgb = np.empty((n, 3), np.float32), np.empty((n, 3), np.uint8)
    rec = struct.Struct("<Q3d3BdQ")  # id, xyz, rgb, error, track length; then track (2 x uint32 each)
    off = 8
    for i in range(n):
        _, x, y, z, r, g, b, _, track = rec.unpack_from(data, off)
        xyz[i], rgb[i] = (x, y, z), (r, g, b)
        off += rec.size + 8 * track
    if off != len(data):
        raise ValueError(f"{path}: {len(data) - off} unexpected trailing bytes; not a points3D.bin?")
    return xyz, rgb
