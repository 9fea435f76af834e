"""data.masks (issue 41): training masks named as the images, white = use; masked pixels get no
gradient from the loss, and every way a mask folder can be wrong is one clear error. Masks of
distorted COLMAP cameras are warped as their photos (gsexp.prepare --masks, and on loading)."""
import os

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from PIL import Image

from gsexp.config import validate
from gsexp.scene import load_scene
from gsexp.scene.masks import load_masks
from test_train_run import REPO, write_transforms_scene


def write_masks(folder, scene, value=255, left_black=True):
    folder.mkdir(parents=True, exist_ok=True)
    for cam in scene.train_cameras:
        arr = np.full((cam.height, cam.width), value, np.uint8)
        if left_black:
            arr[:, : cam.width // 2] = 0
        Image.fromarray(arr).save(folder / f"{cam.name}.png")
    return folder


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    return write_transforms_scene(tmp_path_factory.mktemp("scene"))


def test_masks_load_per_training_view_and_bad_folders_say_what_is_wrong(scene_dir, tmp_path):
    scene = load_scene("transforms", scene_dir, test_every=4)
    masks = load_masks(write_masks(tmp_path / "m", scene), scene)
    assert len(masks) == len(scene.train_cameras) and masks[0].shape == (1, 24, 24)
    assert masks[0][0, :, :12].max() == 0 and masks[0][0, :, 12:].min() == 1
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load_masks(tmp_path / "none", scene)
    (tmp_path / "m" / f"{scene.train_cameras[1].name}.png").unlink()
    with pytest.raises(FileNotFoundError, match=f"no mask for training view '{scene.train_cameras[1].name}'"):
        load_masks(tmp_path / "m", scene)
    with pytest.raises(ValueError, match="every mask .* is black"):
        load_masks(write_masks(tmp_path / "black", scene, value=0), scene)
    scene.meta["undistorted"] = True  # but not by the colmap loader: nothing says how
    with pytest.raises(ValueError, match="would not line up; prepare the scene with python -m gsexp.prepare --masks"):
        load_masks(write_masks(tmp_path / "m2", scene), scene)


def test_masked_pixels_get_no_gradient_in_a_training_step(scene_dir, tmp_path, monkeypatch):
    import gsexp.train.recipe as recipe
    from gsexp.train.phases import PhaseTimer
    from gsexp.train.setup import setup

    scene = load_scene("transforms", scene_dir, test_every=4)
    masks = write_masks(tmp_path / "m", scene)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = validate(compose("train", overrides=[
            "data=transforms", f"data.path={scene_dir}", "data.test_every=4", f"data.masks={masks}", "logger=none",
            "strategy=none", "model.num_random=300", "model.sh_degree=0", "iterations=10"]))
    run = setup(cfg, tmp_path / "run")
    seen = []

    def render_keeping_the_image_grad(*args, **kwargs):
        out = real_render(*args, **kwargs)
        out.image.retain_grad()
        seen.append(out)
        return out

    real_render = recipe.render
    monkeypatch.setattr(recipe, "render", render_keeping_the_image_grad)
    recipe.train_step(run, 0, PhaseTimer(run.device))
    grad = seen[0].image.grad
    assert grad[:, :, :12].abs().max() == 0 and grad[:, :, 12:].abs().max() > 0


# Masks of distorted COLMAP cameras: warped exactly as their photos, by gsexp.prepare's writer and on loading.
SQUARES = [(96, 10), (110, 74), (8, 80)]  # (x, y) of each photo's bright square: off-centre, where the warp is strong
SIDE = 34


def square(value, background, x, y, size=(160, 120), scale=1):
    arr = np.full((size[1] * scale, size[0] * scale), background, np.uint8)
    arr[y * scale:(y + SIDE) * scale, x * scale:(x + SIDE) * scale] = value
    return arr


@pytest.fixture
def barrel(tmp_path):
    """A COLMAP model of 3 posed photos of one strongly barrel-distorted SIMPLE_RADIAL camera (160x120):
    dark photos with a bright square each, and masks white on the same squares."""
    from gsexp.scene.undistort import import_pycolmap

    pycolmap = import_pycolmap()
    root = tmp_path / "barrel"
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(pycolmap.Camera(model="SIMPLE_RADIAL", width=160, height=120,
                                                    params=[100, 80, 60, -0.2], camera_id=1))
    for i, (x, y) in enumerate(SQUARES):
        rec.add_image_with_trivial_frame(pycolmap.Image(name=f"{i}.jpg", camera_id=1, image_id=i + 1),
                                         pycolmap.Rigid3d(pycolmap.Rotation3d(), np.array([0.2 * i, 0.0, 0.0])))
        (root / "images").mkdir(parents=True, exist_ok=True)
        (root / "masks").mkdir(exist_ok=True)
        grey = square(230, 30, x, y)
        Image.fromarray(np.stack([grey] * 3, -1)).save(root / "images" / f"{i}.jpg", quality=100)
        Image.fromarray(square(255, 0, x, y)).save(root / "masks" / f"{i}.png")
    rec.add_point3D(np.array([0.0, 0.0, 3.0]), pycolmap.Track(), np.array([200, 200, 200], np.uint8))
    (root / "sparse/0").mkdir(parents=True)
    rec.write_binary(str(root / "sparse/0"))
    return root


def mismatch(mask, photo) -> float:
    """The share of the photo's bright square (thresholded) that the mask (thresholded) gets wrong."""
    bright, used = np.asarray(photo) > 130 / 255, np.asarray(mask) > 0.5
    assert bright.shape == used.shape and bright.sum() > 100  # the square is in view
    return float((bright != used).sum() / bright.sum())


def test_prepare_writes_masks_warped_as_their_photos(barrel, tmp_path):
    from gsexp.scene.undistort import import_pycolmap, undistort_model

    pycolmap = import_pycolmap()
    for max_size in (None, 100):  # the output size (a capped one too) is the photos'
        out = tmp_path / f"out{max_size}"
        rec = pycolmap.Reconstruction(str(barrel / "sparse/0"))
        undistort_model(rec, barrel / "images", out, max_size=max_size,
                        masks={f"{i}.jpg": barrel / "masks" / f"{i}.png" for i in range(3)})
        assert sorted(p.name for p in (out / "masks").iterdir()) == sorted(p.name for p in (out / "images").iterdir())
        for i in range(3):
            with Image.open(out / "images" / f"{i}.png") as im:
                photo = np.asarray(im.convert("L"), np.float32) / 255
            with Image.open(out / "masks" / f"{i}.png") as im:
                assert im.mode == "L"  # a mask stays one channel
                mask = np.asarray(im, np.float32) / 255
            assert mismatch(mask, photo) < 0.05, (max_size, i)
            if max_size is None:  # the check sees an unwarped mask: only stretched to the new size
                stretched = np.asarray(Image.open(barrel / "masks" / f"{i}.png").resize(photo.shape[::-1])) / 255
                assert mismatch(stretched, photo) > 0.3, i
    # Where the output reaches past the photo (pycolmap's blank_pixels), an all-white mask is 0 there.
    from gsexp.scene.undistort import camera_options, warp_mask

    options = camera_options()
    options.blank_pixels = 1.0
    distorted = pycolmap.Reconstruction(str(barrel / "sparse/0")).cameras[1]  # rec's is PINHOLE now
    white = warp_mask(options, np.full((120, 160), 255, np.uint8), distorted)
    h, w = white.shape
    assert white.dtype == np.uint8 and white[0, w // 2] == 0 and white[h // 2, w // 2] == 255  # barrel: edges' middles


def test_masks_of_views_undistorted_on_loading_line_up_and_follow_changes(barrel, tmp_path, monkeypatch):
    import gsexp.scene.undistort as undistort

    cache = tmp_path / "cache"
    scene = load_scene("colmap", barrel, test_every=0, cache=cache)
    assert scene.meta["undistorted"] and scene.train_cameras[0].width > 160
    masks = load_masks(barrel / "masks", scene)
    for mask, image in zip(masks, scene.train_images):
        assert mask.shape[1:] == image.shape[1:] and mismatch(mask[0], image.mean(0)) < 0.05
    entry = next((cache / "undistorted").iterdir())
    assert len(list(entry.glob("masks-*"))) == 1

    def fail(*args, **kwargs):
        raise AssertionError("masks warped again although nothing changed")

    monkeypatch.setattr(undistort, "warp_mask", fail)
    again = load_masks(barrel / "masks", scene)  # served from the cache
    assert all(torch.equal(a, b) for a, b in zip(masks, again))
    monkeypatch.undo()
    # An edited mask (same name, same size on disk or not): a new warp, not the old one.
    moved = barrel / "masks/0.png"
    Image.fromarray(square(255, 0, *SQUARES[1])).save(moved)
    os.utime(moved, ns=(moved.stat().st_atime_ns, moved.stat().st_mtime_ns + 10**9))
    edited = load_masks(barrel / "masks", scene)
    assert mismatch(edited[0][0], scene.train_images[1].mean(0)) < 0.05
    # Masks of twice the photos' size, and a downscaled load: still on the squares.
    big = tmp_path / "big"
    big.mkdir()
    for i, (x, y) in enumerate(SQUARES):
        Image.fromarray(square(255, 0, x, y, scale=2)).save(big / f"{i}.png")
    half = load_scene("colmap", barrel, test_every=0, cache=cache, downscale=2)
    for mask, image in zip(load_masks(big, half), half.train_images):
        assert mask.shape[1:] == image.shape[1:] and mismatch(mask[0], image.mean(0)) < 0.1
    assert len(list(entry.glob("masks-*"))) == 3 and not list(entry.glob(".*"))  # no partial folder left
