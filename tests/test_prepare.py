"""python -m gsexp.prepare on a few downscaled beer photos: it registers them, the scene trains, and
each bad input gives one clear line and exit status 2 without touching what is already on disk.
The photos are downscaled into tmp_path (shared data is read-only)."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gsexp.prepare import Display, SfmOptions, prepare
from gsexp.prepare.__main__ import main
from gsexp.scene.undistort import import_pycolmap

REPO = Path(__file__).resolve().parents[1]
SIZE = 480  # longer side of the test photos: ~2 s of SfM for 10 of them


def downscaled(shared, folder: Path, names, size=SIZE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        with Image.open(shared / "data/colmap/beer/images" / name) as im:
            im.thumbnail((size, size))
            im.save(folder / name, quality=95)
    return folder


def listing(folder: Path) -> dict:
    """name -> content hash of every file under folder (to show nothing was written there)."""
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def photos(shared, tmp_path_factory):
    need = shared / "data/colmap/beer/images"
    if not need.is_dir():
        pytest.skip(f"{need} not found")
    names = [f"{i:04d}.jpg" for i in range(10)]  # consecutive frames: they overlap well
    return downscaled(shared, tmp_path_factory.mktemp("beer10") / "photos", names)


@pytest.fixture(scope="module")
def prepared(photos):
    """The CLI as a user runs it (not a terminal: plain progress lines), its output and the scene."""
    before = listing(photos)
    scene = photos.parent / "scene"
    proc = subprocess.run([sys.executable, "-m", "gsexp.prepare", str(photos), str(scene)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert listing(photos) == before, "prepare wrote into the image folder"
    return scene, proc


def test_prepare_registers_most_photos(prepared):
    scene, proc = prepared
    pycolmap = import_pycolmap()
    rec = pycolmap.Reconstruction(str(scene / "sparse/0"))
    assert rec.num_reg_images() >= 8  # of 10; all 10 when measured
    assert {c.model.name for c in rec.cameras.values()} == {"PINHOLE"}
    assert sorted(p.name for p in (scene / "images").iterdir()) == sorted(im.name for im in rec.images.values())
    assert {c.model.name for c in pycolmap.Reconstruction(str(scene / "distorted/sparse/0")).cameras.values()} \
        == {"SIMPLE_RADIAL"}
    summary = json.loads((scene / "prepare.json").read_text())["summary"]
    assert summary["registered"] == rec.num_reg_images() and 0 < summary["reprojection_error"] < 1.5
    out = proc.stdout
    for stage in ("features", "matching", "mapping", "undistorting"):
        assert f"[prepare] {stage}" in out  # the plain-line progress display
    assert f"{summary['registered']}/10 images registered" in out and "mean reprojection error" in out
    assert not [p for p in scene.parent.iterdir() if p.name.startswith(".scene.")]  # no staging left


def test_prepared_scene_trains(prepared, tmp_path):
    scene, _ = prepared
    # One torch thread: on tiny images two threads only spin, 10x slower beside another busy process.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "train.py"), "data=colmap", f"data.path={scene}",
                           "data.downscale=4", "iterations=200", "strategy=none", "model.sh_degree=0",
                           "logger=none", "device=cpu", "eval_lpips=false", "eval_every=0",
                           "checkpoint_every=0", f"paths.root={tmp_path}", "name=prepared"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "runs/prepared/summary.json").read_text())
    assert summary["status"] == "ok" and summary["iterations"] == 200
    assert summary["psnr"] > 14  # the initial points render ~5 dB; measured 18.2 dB
    assert "distortion is ignored" not in proc.stdout + proc.stderr  # PINHOLE: nothing to undistort


def run_cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args] + ["--quiet"])
    err = capsys.readouterr().err.strip()
    return code, err


def noise_photos(folder: Path, n: int, size=(320, 240)) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray((rng.random((size[1], size[0], 3)) * 255).astype(np.uint8)).save(folder / f"{i}.png")
    return folder


def check_one_line(code: int, err: str, *words):
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("python -m gsexp.prepare: error: ")
    for word in words:
        assert word in err, err


def test_too_few_images(tmp_path, capsys):
    photos = noise_photos(tmp_path / "two", 2)
    check_one_line(*run_cli(capsys, photos, tmp_path / "scene"), "too few images: 2", "at least 3")
    assert not (tmp_path / "scene").exists()


def test_unreadable_file(photos, tmp_path, capsys):
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in sorted(os.listdir(photos))[:4]:
        (folder / name).write_bytes((photos / name).read_bytes())
    (folder / "broken.jpg").write_bytes(b"not a jpeg")
    check_one_line(*run_cli(capsys, folder, tmp_path / "scene"), "cannot read 1 of 5", "broken.jpg")


def test_nothing_registered(tmp_path, capsys):
    photos = noise_photos(tmp_path / "noise", 4)  # random pixels: features, but no two photos match
    check_one_line(*run_cli(capsys, photos, tmp_path / "scene"), "no photo", "could be registered")
    assert not (tmp_path / "scene").exists() and [p.name for p in tmp_path.iterdir()] == ["noise"]


def test_disconnected_capture_names_the_dropped_photos(shared, photos, tmp_path, capsys):
    folder = tmp_path / "two_scenes"
    folder.mkdir()
    for name in sorted(os.listdir(photos))[:5]:
        (folder / name).write_bytes((photos / name).read_bytes())
    size = Image.open(folder / "0000.jpg").size
    for path in sorted((shared / "data/llff/fern/images_8").glob("*.png"))[:5]:  # another scene, same size
        Image.open(path).convert("RGB").resize(size).save(folder / f"fern_{path.stem}.jpg", quality=95)
    code, err = run_cli(capsys, folder, tmp_path / "scene")
    check_one_line(code, err, "2 separate models", "would drop 5 photo(s)", "--keep-largest")
    dropped = err.split("would drop 5 photo(s): ")[1].split(". ")[0].split(", ")
    assert len(dropped) == 5 and len({n.startswith("fern_") for n in dropped}) == 1  # one whole scene


def test_mixed_sizes_with_a_shared_camera(tmp_path, capsys):
    folder = noise_photos(tmp_path / "mixed", 3)
    Image.open(folder / "0.png").resize((100, 80)).save(folder / "0.png")
    check_one_line(*run_cli(capsys, folder, tmp_path / "scene"), "2 sizes", "--no-single-camera")


def test_scene_folder_is_never_the_input_nor_overwritten(photos, tmp_path, capsys):
    before = listing(photos)
    check_one_line(*run_cli(capsys, photos, photos / "scene"), "inside the image folder")
    check_one_line(*run_cli(capsys, photos, photos.parent), "inside the scene folder")
    scene = tmp_path / "scene"
    scene.mkdir()
    (scene / "mine.txt").write_text("keep")
    check_one_line(*run_cli(capsys, photos, scene), "not empty", "--overwrite")
    # --overwrite with a run that fails: the old scene stays as it was.
    noise = noise_photos(tmp_path / "noise", 4)
    check_one_line(*run_cli(capsys, noise, scene, "--overwrite"), "could be registered")
    assert listing(scene) == {"mine.txt": hashlib.sha1(b"keep").hexdigest()}
    assert listing(photos) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["noise", "scene"]  # no staging folder left


def test_the_same_photos_give_the_same_scene(prepared, tmp_path):
    """Two more runs on the same photos write the same model and images, byte for byte (the
    images used to be numbered in the order the extractor's threads finished them, and the
    matches' RANSAC was unseeded: models and trainings changed from run to run)."""
    scene, _ = prepared
    model = {k: v for k, v in listing(scene).items() if k != "prepare.json"}  # it holds the seconds
    for run in range(2):
        again = tmp_path / f"again{run}"
        prepare(scene.parent / "photos", again, display=Display(quiet=True))
        assert {k: v for k, v in listing(again).items() if k != "prepare.json"} == model


def test_overwrite_replaces_the_scene_once_complete(photos, tmp_path):
    scene = tmp_path / "scene"
    scene.mkdir()
    (scene / "old.txt").write_text("old")
    five = tmp_path / "five"
    five.mkdir()
    for name in sorted(os.listdir(photos))[:5]:
        (five / name).write_bytes((photos / name).read_bytes())
    summary = prepare(five, scene, SfmOptions(max_size=0), overwrite=True, display=Display(quiet=True))
    assert summary.registered >= 4 and not (scene / "old.txt").exists()
    assert (scene / "sparse/0/cameras.bin").is_file() and len(list((scene / "images").iterdir())) == summary.registered


def write_masks(photos: Path, folder: Path, names) -> Path:
    """A mask per photo, named as it and of its size: white but for a black off-centre rectangle."""
    folder.mkdir()
    for name in names:
        with Image.open(photos / name) as im:
            width, height = im.size
        arr = np.full((height, width), 255, np.uint8)
        arr[height // 10:height // 3, width // 2:width - width // 8] = 0
        Image.fromarray(arr).save(folder / f"{Path(name).stem}.png")
    return folder


def test_masks_are_undistorted_as_their_photos(photos, tmp_path, capsys):
    from gsexp.scene import load_scene
    from gsexp.scene.masks import load_masks
    from gsexp.scene.undistort import camera_options

    five = tmp_path / "five"
    five.mkdir()
    names = sorted(os.listdir(photos))[:5]
    for name in names:
        (five / name).write_bytes((photos / name).read_bytes())
    masks, scene = write_masks(five, tmp_path / "masks", names), tmp_path / "scene"
    assert main([str(five), str(scene), "--masks", str(masks), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"data.masks={scene / 'masks'}" in out
    assert json.loads((scene / "prepare.json").read_text())["masks"] == str(masks.resolve())
    written = sorted(p.name for p in (scene / "masks").iterdir())
    assert written == sorted(p.name for p in (scene / "images").iterdir()) and len(written) >= 4
    # Each mask went through its photo's warp: pycolmap's undistortion with the mapped camera.
    pycolmap = import_pycolmap()
    rec = pycolmap.Reconstruction(str(scene / "distorted/sparse/0"))
    for im in rec.images.values():
        mask = np.asarray(Image.open(masks / f"{Path(im.name).stem}.png"))
        expected, _ = pycolmap.undistort_image(camera_options(SfmOptions().max_size), pycolmap.Bitmap.from_array(mask),
                                               im.camera)
        with Image.open(scene / "masks" / f"{Path(im.name).stem}.png") as got, \
                Image.open(scene / "images" / f"{Path(im.name).stem}.png") as photo:
            assert got.mode == "L" and got.size == photo.size
            np.testing.assert_array_equal(np.asarray(got), expected.to_array().reshape(got.height, got.width))
    loaded = load_scene("colmap", scene, test_every=0)  # PINHOLE: the masks are read as written
    assert len(load_masks(scene / "masks", loaded)) == len(loaded.train_cameras)


def test_mask_folder_problems_are_one_line_before_any_sfm(photos, tmp_path, capsys, monkeypatch):
    import gsexp.prepare.pipeline as pipeline

    def no_sfm(*args, **kwargs):
        raise AssertionError("structure from motion ran before the masks were checked")

    monkeypatch.setattr(pipeline, "run_sfm", no_sfm)
    names = sorted(os.listdir(photos))
    masks, scene = write_masks(photos, tmp_path / "masks", names), tmp_path / "scene"
    check_one_line(*run_cli(capsys, photos, scene, "--masks", tmp_path / "none"), "mask folder", "does not exist")
    check_one_line(*run_cli(capsys, photos, scene, "--masks", photos), "the mask folder is the image folder")
    (masks / "0003.png").unlink()
    (masks / "0007.png").unlink()
    check_one_line(*run_cli(capsys, photos, scene, "--masks", masks),
                   "no mask for photo 0003.jpg", "2 of 10 photos have none", "add 0003.png")
    Image.new("L", (100, 50), 255).save(masks / "0003.jpg")  # another image type is fine, not another size
    Image.new("L", (100, 50), 255).save(masks / "0007.png")
    check_one_line(*run_cli(capsys, photos, scene, "--masks", masks),
                   f"mask {masks / '0003.jpg'} is 100x50 but its photo 0003.jpg is", "at its photo's size")
    assert not scene.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["masks"]


class FakeModel:
    """Stands in for a pycolmap.Reconstruction in pick_model: the names it registered."""

    def __init__(self, *names):
        self.images = {i: type("Im", (), {"name": n, "has_pose": True})() for i, n in enumerate(names)}

    def num_reg_images(self):
        return len(self.images)


def test_a_sub_model_of_kept_photos_is_not_a_split():
    from gsexp.prepare.inputs import PrepareError
    from gsexp.prepare.sfm import pick_model

    names = ["a", "b", "c", "d", "e"]
    model = pick_model({0: FakeModel("a", "b", "c", "d"), 1: FakeModel("b", "c")}, names, Path("x"), False)
    assert model.registered == ["a", "b", "c", "d"] and model.dropped == ["e"] and model.others == []
    with pytest.raises(PrepareError, match=r"2 separate models.*would drop 2 photo\(s\): d, e"):
        pick_model({0: FakeModel("a", "b", "c"), 1: FakeModel("d", "e")}, names, Path("x"), False)
    kept = pick_model({0: FakeModel("a", "b", "c"), 1: FakeModel("d", "e")}, names, Path("x"), True)
    assert kept.dropped == ["d", "e"] and kept.others == [["d", "e"]]
