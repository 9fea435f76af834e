"""experiments/real_captures/exposure.py: per-photo gains measured from the SfM points find a
photo darkened on purpose, and leave the others near 1."""
import importlib.util
import shutil

import numpy as np
import pytest
from PIL import Image

from conftest import REPO


def exposure_module():
    spec = importlib.util.spec_from_file_location("exposure", REPO / "experiments/real_captures/exposure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_darkened_photo_has_that_gain(shared, tmp_path):
    pytest.importorskip("pycolmap")
    beer = shared / "data/colmap/beer"
    shutil.copytree(beer / "sparse", tmp_path / "sparse")
    (tmp_path / "images").mkdir()
    for photo in sorted((beer / "images").glob("*.jpg")):
        (tmp_path / "images" / photo.name).symlink_to(photo)
    before = exposure_module().gains(tmp_path)
    (tmp_path / "images/0005.jpg").unlink()
    pixels = np.asarray(Image.open(beer / "images/0005.jpg"), dtype=np.float64)
    Image.fromarray(np.round(pixels * 0.8).astype(np.uint8)).save(tmp_path / "images/0005.jpg", quality=95)
    after = exposure_module().gains(tmp_path)
    assert after["0005.jpg"][0] / before["0005.jpg"][0] == pytest.approx(np.full(3, 0.8), abs=0.02)
    assert before["0005.jpg"][1] > 300  # points behind the figure
    others = [n for n in before if n != "0005.jpg"]
    assert max(np.abs(after[n][0] - before[n][0]).max() for n in others) < 0.01  # one photo of 3+ moves a median little


def test_exposure_refuses_a_folder_without_a_model(tmp_path):
    with pytest.raises(SystemExit) as exit_:
        exposure_module().main([str(tmp_path)])
    assert exit_.value.code == 2
