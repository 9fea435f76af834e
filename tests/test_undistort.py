"""data=colmap undistorts distorted cameras through pycolmap into a cache outside the scene folder:
the same pixels and camera as pycolmap's own undistortion, reused while the input is unchanged,
remade when it changes; data.undistort=false keeps the old behaviour (and its warning)."""
import hashlib
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gsexp.config import ConfigError, validate
from gsexp.scene import load_scene
from gsexp.scene.undistort import import_pycolmap, png_names

CONF = Path(__file__).resolve().parents[1] / "conf"
OmegaConf.register_new_resolver("gsexp_run_name", lambda s, name=None: name or s or "default", replace=True)
KEEP = ("0000.jpg", "0003.jpg", "0008.jpg")  # with test_every=8 the test view is 0000


@pytest.fixture
def small_beer(shared, tmp_path) -> Path:
    """beer's own COLMAP model (SIMPLE_RADIAL) cut to three registered photos, in tmp_path."""
    src = shared / "data/colmap/beer"
    if not (src / "sparse/0/images.bin").is_file():
        pytest.skip(f"{src} not found")
    pycolmap = import_pycolmap()
    rec = pycolmap.Reconstruction(str(src / "sparse/0"))
    for im in list(rec.images.values()):
        if im.name not in KEEP:
            rec.deregister_frame(im.frame_id)
    root = tmp_path / "beer3"
    (root / "sparse/0").mkdir(parents=True)
    rec.write_binary(str(root / "sparse/0"))
    (root / "images").mkdir()
    for name in KEEP:
        shutil.copy2(src / "images" / name, root / "images" / name)
    return root


def listing(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_undistortion_equals_pycolmaps(small_beer, tmp_path):
    pycolmap = import_pycolmap()
    before = listing(small_beer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "distortion is ignored" any more
        scene = load_scene("colmap", small_beer, test_every=0, cache=tmp_path / "cache")
    assert listing(small_beer) == before, "the loader wrote into the scene folder"
    assert [c.name for c in scene.train_cameras] == [Path(n).stem for n in KEEP]
    rec = pycolmap.Reconstruction(str(small_beer / "sparse/0"))
    image = rec.find_image_with_name("0003.jpg")
    bitmap = pycolmap.Bitmap.read(str(small_beer / "images/0003.jpg"), True)
    ref_bitmap, ref_cam = pycolmap.undistort_image(pycolmap.UndistortCameraOptions(), bitmap, image.camera)
    ours, cam = scene.train_images[1], scene.train_cameras[1]
    # Exact: the cache stores the warped pixels as PNG, the loader divides by 255.
    np.testing.assert_array_equal(np.round(ours.permute(1, 2, 0).numpy() * 255).astype(np.uint8),
                                  ref_bitmap.to_array())
    assert (cam.width, cam.height) == (ref_cam.width, ref_cam.height)
    assert (cam.fx, cam.fy, cam.cx, cam.cy) == pytest.approx(
        (ref_cam.focal_length_x, ref_cam.focal_length_y, ref_cam.principal_point_x, ref_cam.principal_point_y),
        rel=1e-12)
    # The same camera as COLMAP's image_undistorter (pycolmap.undistort_images) writes.
    pycolmap.undistort_images(tmp_path / "colmap", small_beer / "sparse/0", small_beer / "images",
                              image_names=["0003.jpg"])
    written = pycolmap.Reconstruction(str(tmp_path / "colmap/sparse"))  # kept: the camera points into it
    theirs = written.find_image_with_name("0003.jpg").camera
    assert theirs.model.name == "PINHOLE"
    assert (theirs.width, theirs.height, *theirs.params) == pytest.approx(
        (cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy), rel=1e-12)


def test_cache_is_reused_and_remade_when_the_input_changes(small_beer, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    load_scene("colmap", small_beer, cache=cache)
    entries = sorted((cache / "undistorted").iterdir())
    assert len(entries) == 1 and entries[0].name.startswith("beer3-")
    import gsexp.scene.undistort as undistort

    def fail(*args, **kwargs):
        raise AssertionError("undistorted again although nothing changed")

    monkeypatch.setattr(undistort, "undistort_model", fail)
    again = load_scene("colmap", small_beer, cache=cache)  # served from the cache
    monkeypatch.undo()
    photo = small_beer / "images/0003.jpg"
    data = bytearray(photo.read_bytes())
    data[-3] ^= 0xFF  # changed pixels, maybe the same size: mtime tells
    photo.write_bytes(bytes(data))
    os.utime(photo, ns=(photo.stat().st_atime_ns, photo.stat().st_mtime_ns + 10**9))
    load_scene("colmap", small_beer, cache=cache)
    assert len(list((cache / "undistorted").iterdir())) == 2
    assert not [p for p in (cache / "undistorted").iterdir() if p.name.startswith(".")]  # no partial entry
    assert len(again.train_cameras) + len(again.test_cameras) == 3


def test_undistort_false_ignores_the_distortion_with_a_warning(small_beer, tmp_path):
    with pytest.warns(UserWarning, match="distortion is ignored"):
        scene = load_scene("colmap", small_beer, undistort=False, cache=tmp_path / "cache", downscale=4)
    assert not (tmp_path / "cache").exists()
    undistorted = load_scene("colmap", small_beer, cache=tmp_path / "cache", downscale=4)
    assert [c.name for c in scene.test_cameras] == [c.name for c in undistorted.test_cameras] == ["0000"]
    assert scene.test_cameras[0].width == 180 and undistorted.test_cameras[0].width < 180  # cropped to valid pixels


def test_prescaled_image_folder_is_undistorted_with_a_rescaled_camera(small_beer, tmp_path):
    from PIL import Image

    (small_beer / "images_2").mkdir()
    for name in KEEP:  # images_N holds the photos already downscaled by N
        with Image.open(small_beer / "images" / name) as im:
            im.resize((im.width // 2, im.height // 2), Image.BILINEAR).save(small_beer / "images_2" / name)
    full = load_scene("colmap", small_beer, test_every=0, cache=tmp_path / "cache")
    half = load_scene("colmap", small_beer, test_every=0, downscale=2, cache=tmp_path / "cache")
    for a, b in zip(full.train_cameras, half.train_cameras):
        assert abs(b.width - a.width / 2) <= 1 and abs(b.height - a.height / 2) <= 1
        assert b.fx == pytest.approx(a.fx / 2, rel=0.01) and b.cx == pytest.approx(a.cx / 2, abs=1)
    assert len(list((tmp_path / "cache/undistorted").iterdir())) == 2  # one entry per image folder


def test_png_names_keep_stems_unless_they_collide():
    assert png_names(["a.jpg", "b.JPG", "c.png"]) == {"a.jpg": "a.png", "b.JPG": "b.png", "c.png": "c.png"}
    assert png_names(["x.jpg", "x.png"]) == {"x.jpg": "x.jpg.png", "x.png": "x.png.png"}


def compose_data(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=["data=colmap", *overrides])


def test_data_undistort_key(shared, tmp_path):
    beer = shared / "data/colmap/beer"
    cfg = validate(compose_data(f"data.path={beer}", f"paths.root={tmp_path}"))
    assert cfg.data.undistort is True
    assert OmegaConf.to_container(cfg.data.options, resolve=True) == {"undistort": True,
                                                                      "cache": f"{tmp_path}/cache"}
    cfg = validate(compose_data(f"data.path={beer}", "data.undistort=false"))
    assert OmegaConf.to_container(cfg.data.options, resolve=True)["undistort"] is False
    with pytest.raises(ConfigError, match="data.undistort"):
        validate(compose_data(f"data.path={beer}", "data.undistort=sometimes"))
