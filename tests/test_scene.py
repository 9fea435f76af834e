"""Scene loaders: real scenes from shared/ (conventions checked by projecting SfM points) and
tiny hand-made fixtures for the transforms / blender formats and their errors."""
import json
import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from gsexp.scene import Camera, Scene, load_scene
from gsexp.scene.colmap import read_points3d
from gsexp.scene.images import read_image


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not in the shared data")
    return path


def project(cam: Camera, pts: torch.Tensor):
    """pixel = K @ (R p + t), COLMAP convention (pixel centres at +0.5). Returns u, v, z."""
    w2c = cam.world_to_camera.double()
    p = pts.double() @ w2c[:3, :3].T + w2c[:3, 3]
    z = p[:, 2]
    return cam.fx * p[:, 0] / z + cam.cx, cam.fy * p[:, 1] / z + cam.cy, z


def point_agreement(cam, img, pts, colors):
    """(fraction in front, fraction inside the frame, median colour error of the points inside)."""
    u, v, z = project(cam, pts)
    inside = (z > 0) & (u >= 0) & (u < cam.width) & (v >= 0) & (v < cam.height)
    err = 1.0
    if inside.sum() >= 10:
        sampled = img[:, v[inside].long(), u[inside].long()].T
        err = (sampled - colors[inside]).abs().mean(1).median().item()
    return (z > 0).float().mean().item(), inside.float().mean().item(), err


def check_points(scene: Scene, transform=lambda c: c) -> tuple[float, float, float]:
    """Fails unless SfM points land in front of / inside every view, on pixels of their colour.

    Measured (correct convention): fern front 1.00, inside >= 0.96, colour err 0.090;
    beer front >= 0.97, inside >= 0.85, colour err 0.076. Transposed rotation, c2w used as
    w2c, or swapped x/y axes give colour errors >= 0.2 (fern's inside fraction stays high
    for some of them since its views are nearly fronto-parallel, hence the colour check).
    """
    views = zip(scene.train_cameras + scene.test_cameras, scene.train_images + scene.test_images)
    stats = [point_agreement(transform(c), im, scene.points, scene.point_colors) for c, im in views]
    front, inside, err = (min(s[0] for s in stats), min(s[1] for s in stats),
                          float(np.mean([s[2] for s in stats])))
    assert front > 0.95, f"worst view has only {front:.3f} of points in front"
    assert inside > 0.8, f"worst view has only {inside:.3f} of points inside the frame"
    assert err < 0.12, f"projected points land on pixels of another colour (median err {err:.3f})"
    return front, inside, err


def transposed(cam):
    m = cam.world_to_camera.clone()
    m[:3, :3] = m[:3, :3].T.clone()
    return replace(cam, world_to_camera=m)


def inverted(cam):
    return replace(cam, world_to_camera=torch.linalg.inv(cam.world_to_camera))


def swapped_xy(cam):
    m = cam.world_to_camera.clone()
    m[[0, 1]] = m[[1, 0]]
    return replace(cam, world_to_camera=m)


# ----- real scenes -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def lego(shared):
    return load_scene("blender", need(shared / "data/nerf_synthetic/lego"), downscale=8)


@pytest.fixture(scope="module")
def fern(shared):
    return load_scene("llff", need(shared / "data/llff/fern"))


@pytest.fixture(scope="module")
def beer(shared):
    with pytest.warns(UserWarning, match="distortion is ignored"):  # undistorting: tests/test_undistort.py
        return load_scene("colmap", need(shared / "data/colmap/beer"), downscale=4, undistort=False)


def test_blender_lego(lego):
    assert len(lego.train_cameras) == 100 and len(lego.test_cameras) == 200
    assert lego.points is None and lego.background == (1.0, 1.0, 1.0)
    for img in lego.train_images[:5] + lego.test_images[:5]:
        assert img.shape == (3, 100, 100) and img.dtype == torch.float32
        assert 0.0 <= img.min() and img.max() <= 1.0
    assert torch.allclose(lego.train_images[0][:, 0, 0], torch.ones(3))  # transparent -> white
    cam = lego.train_cameras[0]
    assert (cam.width, cam.height, cam.cx, cam.cy) == (100, 100, 50.0, 50.0)
    assert cam.fx == pytest.approx(0.5 * 100 / math.tan(0.5 * 0.6911112070083618))
    for cam in lego.train_cameras + lego.test_cameras:
        o = cam.world_to_camera[:3, 3]  # the world origin in camera coordinates
        assert o[2] > 0, f"{cam.name}: origin behind the camera"
        assert o[:2].norm() < 0.1 * o.norm(), f"{cam.name}: optical axis misses the origin"


def test_llff_fern(fern):
    assert len(fern.train_cameras) == 17 and len(fern.test_cameras) == 3
    assert [c.name for c in fern.test_cameras] == ["image000", "image008", "image016"]
    cam = fern.train_cameras[0]
    assert (cam.width, cam.height) == (504, 378) and fern.train_images[0].shape == (3, 378, 504)
    assert cam.fx == pytest.approx(3260.526 * 504 / 4032, rel=1e-4)
    assert fern.points.shape[1] == 3 and len(fern.points) > 1000
    assert fern.meta["near"] > 0 and fern.meta["far"] > fern.meta["near"]
    check_points(fern)


def test_colmap_beer(beer):
    assert len(beer.train_cameras) + len(beer.test_cameras) == 71 and len(beer.test_cameras) == 9
    assert beer.train_images[0].shape == (3, 320, 180)  # 720x1280 resized from images/
    assert beer.point_colors.shape == beer.points.shape and beer.point_colors.max() <= 1.0
    check_points(beer)


@pytest.mark.parametrize("wrong", [transposed, inverted, swapped_xy])
@pytest.mark.parametrize("name", ["fern", "beer"])
def test_wrong_convention_fails_point_check(name, wrong, request):
    with pytest.raises(AssertionError):
        check_points(request.getfixturevalue(name), wrong)


def test_points3d_reader_matches_pycolmap(shared):
    pycolmap = pytest.importorskip("pycolmap")
    sparse = need(shared / "data/colmap/beer/sparse/0")
    xyz, rgb = read_points3d(sparse / "points3D.bin")
    rec = pycolmap.Reconstruction(str(sparse))
    ref_xyz = np.array([p.xyz for p in rec.points3D.values()], np.float32)  # same rounding as ours
    ref_rgb = np.array([p.color for p in rec.points3D.values()], np.uint8)
    assert xyz.shape == ref_xyz.shape
    # File order may differ from pycolmap's; some points share a position, so sort by xyz + rgb.
    ours = np.lexsort(np.hstack([rgb, xyz]).T)
    ref = np.lexsort(np.hstack([ref_rgb, ref_xyz]).T)
    np.testing.assert_array_equal(xyz[ours], ref_xyz[ref])
    np.testing.assert_array_equal(rgb[ours], ref_rgb[ref])


def test_fern_as_colmap_points_to_llff(shared):
    with pytest.raises(FileNotFoundError, match=r"images\.bin.*llff"):
        load_scene("colmap", need(shared / "data/llff/fern"))


# ----- load_scene dispatch ---------------------------------------------------------------

def test_load_scene_errors(tmp_path):
    with pytest.raises(ValueError, match="blender.*transforms.*llff.*colmap.*synthetic"):
        load_scene("nerf", tmp_path)
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        load_scene("blender", tmp_path / "does-not-exist")


# ----- transforms.json fixtures ----------------------------------------------------------

def write_png(path: Path, w=8, h=6, rgba=False, value=128):
    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.full((h, w, 4 if rgba else 3), value, np.uint8)
    if rgba:
        arr[..., 3] = 0  # fully transparent: must come out as the background colour
    Image.fromarray(arr).save(path)


def frame(name, **extra):
    c2w = np.eye(4)
    c2w[:3, 3] = [0.0, 0.0, 2.0]
    return {"file_path": name, "transform_matrix": c2w.tolist(), **extra}


def write_transforms(folder: Path, frames, n_images=None, **globals_):
    for f in frames[:n_images]:
        name = f["file_path"]
        write_png(folder / (name if Path(name).suffix else name + ".png"))
    (folder / "transforms.json").write_text(json.dumps({**globals_, "frames": frames}, indent=2))


def test_transforms_global_intrinsics(tmp_path):
    frames = [frame(f"images/{i}.png") for i in range(4)]
    write_transforms(tmp_path, frames, fl_x=10.0, fl_y=12.0, cx=4.5, cy=2.5, w=8, h=6)
    scene = load_scene("transforms", tmp_path, test_every=2)
    assert len(scene.train_cameras) == 2 and len(scene.test_cameras) == 2
    cam = scene.train_cameras[0]
    assert (cam.fx, cam.fy, cam.cx, cam.cy, cam.width, cam.height) == (10, 12, 4.5, 2.5, 8, 6)
    # OpenGL camera at z=2 looking down -z: the origin is 2 in front of it in OpenCV terms.
    assert torch.allclose(cam.world_to_camera[:3, 3], torch.tensor([0.0, 0.0, 2.0]))
    half = load_scene("transforms", tmp_path, test_every=2, downscale=2).train_cameras[0]
    assert (half.fx, half.cx, half.width, half.height) == (5, 2.25, 4, 3)


def test_transforms_per_frame_intrinsics_and_no_extension(tmp_path):
    frames = [frame("a", fl_x=10.0, fl_y=10.0), frame("b", fl_x=20.0, fl_y=20.0, cx=1.0, cy=2.0),
              frame("c")]
    write_transforms(tmp_path, frames, camera_angle_x=math.pi / 2)
    scene = load_scene("transforms", tmp_path, test_every=0)
    a, b, c = scene.train_cameras
    assert (a.fx, a.cx, a.cy) == (10, 4, 3)  # cx/cy default to the image centre
    assert (b.fx, b.cx, b.cy) == (20, 1, 2)
    assert c.fx == pytest.approx(4.0) and c.fy == pytest.approx(4.0)  # from camera_angle_x


def test_transforms_missing_images_warn_once(tmp_path):
    write_transforms(tmp_path, [frame(f"{i}.png") for i in range(5)], n_images=3, fl_x=5.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene = load_scene("transforms", tmp_path, test_every=2)
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "skipped 2 of 5 frames" in msgs[0] and "3.png" in msgs[0]
    assert len(scene.train_cameras) + len(scene.test_cameras) == 3


def test_transforms_all_images_missing_raises(tmp_path):
    write_transforms(tmp_path, [frame(f"{i}.png") for i in range(2)], n_images=0, fl_x=5.0)
    with pytest.raises(FileNotFoundError, match="all 2 of 2 frames"):
        load_scene("transforms", tmp_path)


def test_transforms_malformed_json(tmp_path):
    (tmp_path / "transforms.json").write_text('{\n  "fl_x": 5,\n  "frames": [\n    {"file_path": }\n]}')
    with pytest.raises(ValueError, match=r"transforms\.json.*line 4"):
        load_scene("transforms", tmp_path)


def test_transforms_missing_key(tmp_path):
    frames = [frame("0.png"), {"file_path": "1.png"}]
    write_transforms(tmp_path, frames, fl_x=5.0)
    with pytest.raises(ValueError, match=r"frame 1 of .*transforms\.json.*'transform_matrix'"):
        load_scene("transforms", tmp_path)
    write_transforms(tmp_path, [frame("0.png")])
    with pytest.raises(ValueError, match="'fl_x'.*camera_angle_x"):
        load_scene("transforms", tmp_path)


def test_transforms_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"transforms\.json"):
        load_scene("transforms", tmp_path)


# ----- Blender fixtures ------------------------------------------------------------------

def write_blender(root: Path, n=2):
    for split in ("train", "test"):
        frames = [frame(f"./{split}/r_{i}") for i in range(n)]
        for i in range(n):
            write_png(root / split / f"r_{i}.png", 8, 8, rgba=True)
        (root / f"transforms_{split}.json").write_text(
            json.dumps({"camera_angle_x": math.pi / 2, "frames": frames}))


def test_blender_fixture_loads_with_background(tmp_path):
    write_blender(tmp_path)
    scene = load_scene("blender", tmp_path, background=(0.0, 0.5, 1.0))
    assert len(scene.train_cameras) == 2 and len(scene.test_cameras) == 2
    assert torch.allclose(scene.train_images[0][:, 0, 0], torch.tensor([0.0, 0.5, 1.0]))
    assert scene.train_cameras[0].fx == pytest.approx(4.0)
    with pytest.warns(UserWarning, match="transforms_val.json"):
        scene = load_scene("blender", tmp_path, splits={"train": ("train", "val"), "test": "test"})


def test_blender_test_stride_keeps_every_kth_test_view(tmp_path):
    write_blender(tmp_path)
    scene = load_scene("blender", tmp_path, test_stride=2)
    assert len(scene.train_cameras) == 2 and len(scene.test_cameras) == 1
    assert scene.test_cameras[0].name == load_scene("blender", tmp_path).test_cameras[0].name
    with pytest.raises(ValueError, match="test_stride"):
        load_scene("blender", tmp_path, test_stride=0)


def test_blender_missing_transforms_file(tmp_path):
    write_blender(tmp_path)
    (tmp_path / "transforms_test.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"transforms_test\.json"):
        load_scene("blender", tmp_path)


def test_blender_missing_image(tmp_path):
    write_blender(tmp_path)
    (tmp_path / "train" / "r_1.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"r_1\.png.*frame 1 of .*transforms_train\.json"):
        load_scene("blender", tmp_path)


def test_blender_missing_camera_angle(tmp_path):
    write_blender(tmp_path)
    (tmp_path / "transforms_train.json").write_text(json.dumps({"frames": [frame("./train/r_0")]}))
    with pytest.raises(ValueError, match="camera_angle_x"):
        load_scene("blender", tmp_path)


def test_read_image_downscale_is_area_average(tmp_path):
    arr = np.zeros((4, 4, 3), np.uint8)
    arr[:, :2] = 255
    Image.fromarray(arr).save(tmp_path / "x.png")
    from gsexp.scene.images import resize_area
    small = resize_area(read_image(tmp_path / "x.png"), 1, 2)
    assert torch.allclose(small, torch.full((3, 2, 1), 0.5))
    with pytest.raises(FileNotFoundError, match="nope.png"):
        read_image(tmp_path / "nope.png")


def test_camera_values_follow_the_matrix():
    """The CUDA path's camera numbers are kept on the camera; a new matrix, an in-place edit
    or other intrinsics must give fresh ones (a stale cache would render from the old pose)."""
    from gsexp.render.cuda.function import camera_values
    from gsexp.scene.camera import look_at

    def expected(cam):
        m = cam.world_to_camera.double().numpy()
        return (list(m[:3].reshape(-1)) + [cam.fx, cam.fy, cam.cx, cam.cy, *cam.tan_half_fov]
                + list(-m[:3, :3].T @ m[:3, 3]) + [cam.width, cam.height])

    cam = Camera(look_at((3.0, 1.0, 2.0), (0.0, 0.0, 0.0)), 100.0, 90.0, 32.0, 24.0, 64, 48)
    first = camera_values(cam)
    assert np.allclose(first, expected(cam)) and camera_values(cam) is first  # kept
    cam.world_to_camera[0, 3] += 0.5  # in place
    assert np.allclose(camera_values(cam), expected(cam)) and camera_values(cam)[3] != first[3]
    for _ in range(3):  # new matrices, each made after the last was dropped (ids get reused)
        cam.world_to_camera = look_at(tuple(np.random.rand(3) + 2), (0.0, 0.0, 0.0)).float()
        assert np.allclose(camera_values(cam), expected(cam))
    scaled = cam.scaled(0.5)
    assert np.allclose(camera_values(scaled), expected(scaled))
    cam.fx = 120.0
    assert np.allclose(camera_values(cam), expected(cam))
