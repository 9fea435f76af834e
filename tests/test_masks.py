"""data.masks (issue 41): training masks named as the images, white = use; masked pixels get no
gradient from the loss, and every way a mask folder can be wrong is one clear error."""
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
    scene.meta["undistorted"] = True
    with pytest.raises(ValueError, match="undistorted on loading"):
        load_masks(tmp_path / "m", scene)


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
