"""Undistorting COLMAP models through pycolmap: each registered image warped to a PINHOLE camera
(pycolmap.undistort_image, saved as lossless PNG) and the model rewritten with those cameras.
gsexp.prepare writes its scene with it; the colmap loader keeps its result in a cache folder.
Training masks go through the same call with the same options and camera, so they keep lining up."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import threading
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image

PINHOLE_MODELS = ("PINHOLE", "SIMPLE_PINHOLE")
# Perspective models pycolmap's undistorter turns into PINHOLE (the fisheye ones too).
UNDISTORTABLE_MODELS = ("SIMPLE_RADIAL", "RADIAL", "OPENCV", "FULL_OPENCV", "OPENCV_FISHEYE",
                        "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE", "THIN_PRISM_FISHEYE", "FOV")
CACHE_VERSION = 1  # bump when the cached layout or the warp changes, so old entries are not reused
log = logging.getLogger("gsexp.scene")


def import_pycolmap():
    """pycolmap, loaded after the system zlib. pycolmap's _core exports zlib-ng's deflate*; a
    libz.so.1 loaded after it binds its internals to them, and PIL's PNG writer then corrupts
    the heap (measured: pycolmap 4.2.1, Pillow 13)."""
    import zlib  # noqa: F401  (loads libz.so.1 first)

    import pycolmap
    keep_python_sigterm()
    return pycolmap


def keep_python_sigterm() -> None:
    """pycolmap's import installs glog's SIGTERM handler (a native stack dump, then death) over
    Python's; put Python's back (the default, or a clean stop train.py installed)."""
    if threading.current_thread() is threading.main_thread():  # only there may handlers be set
        handler = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_DFL if handler is None else handler)


def camera_options(max_size: int | None = None):
    """pycolmap's undistortion options (its defaults); max_size caps the longer output side."""
    options = import_pycolmap().UndistortCameraOptions()
    if max_size:
        options.max_image_size = int(max_size)
    return options


def png_names(names) -> dict:
    """name -> the name of its PNG: the stem + .png, or name + .png where two stems would collide."""
    counts = Counter(str(Path(n).with_suffix(".png")) for n in names)
    return {n: str(Path(n).with_suffix(".png")) if counts[str(Path(n).with_suffix(".png"))] == 1
            else n + ".png" for n in names}


def registered_images(rec) -> list:
    return sorted((im for im in rec.images.values() if im.has_pose), key=lambda im: im.name)


def check_image_files(image_dir: Path, images, where: str) -> None:
    missing = [im.name for im in images if not (image_dir / im.name).is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} image(s) of {where} not found in {image_dir}: "
                                f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}; "
                                "check that the image folder is complete")


def undistort_model(rec, image_dir, out_dir, *, max_size: int | None = None, on_image=None,
                    masks: dict | None = None) -> dict:
    """Write out_dir/images/*.png and out_dir/sparse/0 (PINHOLE cameras) for rec's registered
    images; rec is changed in place. Returns {new name: source name}. on_image(name) after each.
    masks: {image name: its mask file, of the image's size}, written warped as the image into
    out_dir/masks/ under the image's new name."""
    pycolmap = import_pycolmap()
    image_dir, out_dir = Path(image_dir), Path(out_dir)
    options = camera_options(max_size)
    images = registered_images(rec)
    check_image_files(image_dir, images, "the COLMAP model")
    used = {im.camera_id for im in images}
    distorted = {cid: rec.cameras[cid] for cid in used}
    pinhole = {cid: pycolmap.undistort_camera(options, cam) for cid, cam in distorted.items()}
    names = png_names([im.name for im in images])
    for im in images:
        cam = distorted[im.camera_id]
        bitmap = pycolmap.Bitmap.read(str(image_dir / im.name), True)
        if bitmap is None:
            raise ValueError(f"cannot read image {image_dir / im.name}; replace the file or remove it")
        if (bitmap.width, bitmap.height) != (cam.width, cam.height):
            raise ValueError(f"{image_dir / im.name} is {bitmap.width}x{bitmap.height} but its camera is "
                             f"{cam.width}x{cam.height}; the images do not belong to this COLMAP model")
        warped, _ = pycolmap.undistort_image(options, bitmap, cam)
        save_png(warped.to_array(), out_dir / "images" / names[im.name])
        if masks is not None:
            save_png(warp_mask(options, read_mask(masks[im.name], (cam.width, cam.height)), cam),
                     out_dir / "masks" / names[im.name])
        move_points2d(im, cam, pinhole[im.camera_id])
        if on_image is not None:
            on_image(im.name)
    for cid, cam in pinhole.items():
        cam.camera_id = cid
        rec.cameras[cid] = cam
    for im in images:
        im.name = names[im.name]
    sparse = out_dir / "sparse" / "0"
    sparse.mkdir(parents=True, exist_ok=True)
    rec.write_binary(str(sparse))
    return {new: old for old, new in names.items()}


def read_mask(path: Path, size: tuple[int, int]) -> np.ndarray:
    """The mask as greyscale uint8 [H, W] at `size` (width, height) of its image."""
    with Image.open(path) as im:
        im = im.convert("L")
        if im.size != tuple(size):  # e.g. full-size masks of an images_4 folder
            im = im.resize(size, Image.BOX if im.width >= size[0] else Image.BILINEAR)
        return np.asarray(im)


def warp_mask(options, mask: np.ndarray, cam) -> np.ndarray:
    """The mask through its image's warp: pycolmap.undistort_image with the same options and camera
    (so the same output size and sampling), on a greyscale bitmap; pixels that come from outside the
    image are 0 (not used)."""
    pycolmap = import_pycolmap()
    warped, _ = pycolmap.undistort_image(options, pycolmap.Bitmap.from_array(np.ascontiguousarray(mask)), cam)
    return warped.to_array().reshape(warped.height, warped.width)


def save_png(array: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, compress_level=1)  # lossless; level 1 for speed


def move_points2d(im, distorted, pinhole) -> None:
    """The image's keypoints into the undistorted camera, as COLMAP's undistorter does."""
    points = im.points2D
    if not len(points):
        return
    xy = np.array([p.xy for p in points], dtype=np.float64)
    rays = distorted.cam_from_img(xy)
    moved = pinhole.img_from_cam(np.hstack([rays, np.ones((len(rays), 1))]))
    for p, new in zip(points, moved):
        p.xy = new


def cached_undistortion(sparse, image_dir, cache_root) -> tuple[Path, dict]:
    """The undistorted scene of (sparse, image_dir) under cache_root (made on first use), and
    {undistorted image name: source name}. The entry is keyed by the model's files, the
    images' names, sizes and modification times and the options: a changed input gets a new one."""
    pycolmap = import_pycolmap()
    sparse, image_dir, cache_root = Path(sparse), Path(image_dir), Path(cache_root)
    rec = pycolmap.Reconstruction(str(sparse))
    images = registered_images(rec)
    check_image_files(image_dir, images, str(sparse))
    entry = cache_root / f"{sparse.parents[1].name if sparse.name == '0' else sparse.parent.name}-" \
                         f"{cache_key(sparse, image_dir, images, pycolmap.__version__)}"
    if (entry / "names.json").is_file():  # written last: the entry is complete
        return entry, json.loads((entry / "names.json").read_text())
    cache_root.mkdir(parents=True, exist_ok=True)
    log.info("undistorting %d images of %s into %s (once: reused while the model and images are unchanged)",
             len(images), sparse, entry)
    partial = cache_root / f".{entry.name}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        fit_cameras_to_images(rec, image_dir, images)
        names = undistort_model(rec, image_dir, partial)
        (partial / "source.json").write_text(json.dumps(
            {"sparse": str(sparse.resolve()), "images": str(image_dir.resolve())}, indent=1))
        (partial / "names.json").write_text(json.dumps(names, indent=1))
        publish(partial, entry, "names.json")
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return entry, json.loads((entry / "names.json").read_text())


def publish(partial: Path, entry: Path, last_file: str) -> None:
    """Move a finished partial folder to its cache entry (one rename: readers see all or nothing)."""
    try:
        partial.rename(entry)
    except OSError:  # another process finished the same entry first
        if not (entry / last_file).is_file():
            raise


def cached_masks(files: dict, undistortion: dict) -> dict:
    """{view name: its undistorted mask}: each of `files` ({view name, the stem of its image's
    name: the user's mask}) warped as cached_undistortion warped that image, kept in the same
    entry under masks-<key>. The key hashes the masks' paths, sizes and modification times, so an
    edited or another mask folder is never served an old warp."""
    pycolmap = import_pycolmap()
    sparse, image_dir, entry = (Path(undistortion[k]) for k in ("sparse", "images", "entry"))
    h = hashlib.sha256(f"v{CACHE_VERSION} masks".encode())
    for name, path in sorted(files.items()):
        st = Path(path).stat()
        h.update(f"{name} {Path(path).resolve()} {st.st_size} {st.st_mtime_ns}".encode())
    folder = entry / f"masks-{h.hexdigest()[:16]}"
    warped = {name: folder / f"{name}.png" for name in files}
    if (folder / "done").is_file():  # written last
        return warped
    # The cameras as cached_undistortion had them: the model's, fitted to the image folder.
    rec = pycolmap.Reconstruction(str(sparse))
    images = registered_images(rec)
    fit_cameras_to_images(rec, image_dir, images)
    cameras = {Path(im.name).stem: rec.cameras[im.camera_id] for im in images}
    options = camera_options()  # cached_undistortion's (no max_size)
    partial = entry / f".{folder.name}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        for name, path in files.items():
            cam = cameras[name]
            save_png(warp_mask(options, read_mask(path, (cam.width, cam.height)), cam), partial / f"{name}.png")
        (partial / "done").write_text("")
        publish(partial, folder, "done")
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return warped


def fit_cameras_to_images(rec, image_dir: Path, images) -> None:
    """Rescale each camera to its images' size: a folder like images_4 holds them downscaled."""
    seen = set()
    for im in images:
        if im.camera_id in seen:
            continue
        seen.add(im.camera_id)
        with Image.open(image_dir / im.name) as f:
            width, height = f.size
        cam = rec.cameras[im.camera_id]
        if (cam.width, cam.height) != (width, height):
            cam.rescale(width, height)


def cache_key(sparse: Path, image_dir: Path, images, version: str) -> str:
    """Hash of the model files' bytes, each image's name, size and mtime, and the versions."""
    h = hashlib.sha256(f"v{CACHE_VERSION} pycolmap {version} {image_dir.name}".encode())
    for path in sorted(p for p in sparse.iterdir() if p.is_file() and p.suffix in (".bin", ".txt")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    for im in images:
        st = (image_dir / im.name).stat()
        h.update(f"{im.name} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]
