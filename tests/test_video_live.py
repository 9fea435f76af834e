"""Fly-through videos (decoded back: frame count and size), the trainer's ground truth | render |
error images, and the training hook of the viewer: free without a browser, live with one."""
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from conftest import REPO
from gsexp.gaussians import save_ply
from gsexp.scene import load_scene
from gsexp.scene.synthetic import ground_truth
from gsexp.track.base import Logger

TINY_SCENE = {"num_gaussians": 300, "num_views": 8, "width": 32, "height": 24, "num_points": 0, "seed": 0}


def decoded(path: Path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


@pytest.fixture
def run_dir(tmp_path):
    """A run folder as train.py leaves it, as far as the video reads it: its config and PLY."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({
        "data": {"kind": "synthetic", "test_every": 2, "background": [0.0, 0.0, 0.0], "options": TINY_SCENE},
        "rasterizer": {"_target_": "gsexp.render.settings.TorchSettings"}}))
    save_ply(ground_truth(300), run / "point_cloud.ply")
    return run


def test_orbit_video_decodes_with_its_frames_and_size(run_dir, tmp_path):
    from gsexp.video import main

    out = tmp_path / "orbit.mp4"
    assert main([str(run_dir / "point_cloud.ply"), "--path", "orbit", "--frames", "9", "--width", "47",
                 "--height", "32", "--out", str(out)]) == 0
    frames = decoded(out)
    assert len(frames) == 9 and frames[0].shape == (32, 46, 3)  # H.264: even sizes (47 -> 46)
    assert frames[4].std() > 10  # not blank


def test_test_path_video_follows_the_test_cameras(run_dir, tmp_path):
    from gsexp.video import main

    out = tmp_path / "test.mp4"
    assert main([str(run_dir / "point_cloud.ply"), "--path", "test", "--frames", "7", "--out", str(out)]) == 0
    frames = decoded(out)
    assert len(frames) == 7 and frames[0].shape == (24, 32, 3)  # the test cameras' size
    # The first frame is the first test camera's view of the ground truth. H.264 halves the
    # colour resolution, which moves single pixels of a 32x24 frame by tens of levels: compare
    # 4x4 block means, within a few levels.
    scene = load_scene("synthetic", test_every=2, **TINY_SCENE)
    truth = (scene.test_images[0].permute(1, 2, 0).numpy() * 255)
    blocks = lambda a: a.reshape(6, 4, 8, 4, 3).mean((1, 3))  # noqa: E731
    assert np.abs(blocks(frames[0].astype(np.float32)) - blocks(truth)).mean() < 4


def test_viewer_cameras_round_trip():
    """A Camera -> the viser pose -> a Camera again: the same view (what the test path and the
    frustum clicks rely on)."""
    from gsexp.view.cameras import camera_from_pose, pose_of

    scene = load_scene("synthetic", **TINY_SCENE)
    for cam in scene.train_cameras:
        again = camera_from_pose(*pose_of(cam), cam.fov_y, cam.width, cam.height)
        assert torch.allclose(again.world_to_camera, cam.world_to_camera, atol=1e-5)
        assert again.fy == pytest.approx(cam.fy) and (again.cx, again.cy) == (cam.cx, cam.cy)


def test_viewer_opens_a_bare_model_on_the_up_it_is_given(tmp_path, capsys):
    """A PLY without a run has no cameras to learn "up" from: `--up` sets it, the view opens
    above the model's horizon looking at its core, and a bad axis is a one-line usage error."""
    from gsexp.view.__main__ import main
    from gsexp.view.cameras import start_view

    g = ground_truth(300)
    for axis in ([0.0, 0.0, 1.0], [0.0, -1.0, 0.0]):
        position, target, up = start_view(g, [], up=np.array(axis))
        offset = position - target
        assert np.allclose(up, axis) and np.allclose(target, np.median(g.means.numpy(), axis=0))
        # 20 degrees above the plane perpendicular to up (the bench's orbit elevation)
        assert np.dot(offset, up) / np.linalg.norm(offset) == pytest.approx(np.sin(np.radians(20)), abs=1e-6)
    save_ply(g, tmp_path / "bare.ply")
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "bare.ply"), "--up", "sideways"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--up: expected an axis" in err and "Traceback" not in err


def test_video_without_test_cameras_is_a_one_line_error(tmp_path, capsys):
    from gsexp.video import main

    save_ply(ground_truth(50), tmp_path / "bare.ply")
    assert main([str(tmp_path / "bare.ply"), "--path", "test", "--out", str(tmp_path / "x.mp4")]) == 2
    assert "--path orbit" in capsys.readouterr().err


def test_evaluation_writes_ground_truth_render_error(tmp_path):
    from gsexp.render.settings import TorchSettings
    from gsexp.train.evaluate import evaluate

    scene = load_scene("synthetic", test_every=4, **TINY_SCENE)
    model = ground_truth(300)
    model.means = model.means + 0.01  # a small error, so the error map is not all black
    evaluate(model, scene, TorchSettings(), torch.device("cpu"), Logger(), 1, lpips_net=None, renders_dir=tmp_path)
    for i, ref in enumerate(scene.test_images):
        render = np.asarray(Image.open(tmp_path / f"test_{i:03d}.png"), dtype=np.int16)
        triptych = np.asarray(Image.open(tmp_path / f"test_{i:03d}_compare.png"), dtype=np.int16)
        w = render.shape[1]
        assert triptych.shape == (render.shape[0], 3 * w, 3)
        truth = np.round(ref.permute(1, 2, 0).numpy() * 255)
        assert np.abs(triptych[:, :w] - truth).max() <= 1       # ground truth
        assert np.abs(triptych[:, w:2 * w] - render).max() <= 1  # render
        assert triptych[:, 2 * w:].max() > 0                     # the error map shows the offset


# ----------------------------------------------------------------------------- the training hook

def test_viewer_disabled_changes_nothing():
    from omegaconf import OmegaConf

    from gsexp.view.live import NoViewer, live_viewer

    logger = Logger()
    viewer, same = live_viewer(OmegaConf.create({"viewer": {"enabled": False}}), None, logger, None)
    assert isinstance(viewer, NoViewer) and same is logger


def test_live_viewer_without_a_browser_costs_nothing_and_with_one_sends_the_model():
    from omegaconf import OmegaConf

    from gsexp.view.live import live_viewer

    scene = load_scene("synthetic", **TINY_SCENE)
    calls = []

    def model():
        calls.append(1)
        return ground_truth(100)

    cfg = OmegaConf.create({"viewer": {"enabled": True, "host": "127.0.0.1", "port": 0, "every_s": 0.0}})
    viewer, logger = live_viewer(cfg, scene, Logger(), model)
    try:
        assert len(calls) == 1  # the first model, to serve
        looks, set_model = [], viewer.viewer.set_model
        viewer.viewer.has_clients = lambda: looks.append(1) or False
        viewer.viewer.set_model = lambda *a: pytest.fail("set_model without a browser")
        viewer.status.content = "untouched"
        for step in range(2000):
            logger.log({"train/loss": 0.1, "train/psnr": 20.0 + step * 1e-3}, step)
            viewer.step(step)
        # Without a browser a step is one look at the client list: no model, no render, no GUI update.
        assert len(looks) == 2000 and len(calls) == 1 and viewer.viewer.last == {}
        assert viewer.status.content == "untouched"
        viewer.viewer.set_model = set_model
        viewer.viewer.has_clients = lambda: True  # as if a browser were connected
        viewer.step(2000)
        assert len(calls) == 2 and viewer.viewer._model_version == 1
        steps, psnr = viewer.charts["train/psnr"].data
        assert len(steps) == 2000 and psnr[-1] == pytest.approx(21.999)
    finally:
        viewer.close()


def test_idle_viewer_thread_blocks_until_a_browser_connects():
    """No browser: the render thread waits on one event (no polling that takes the GIL from
    training), connect and disconnect flip has_clients, and close ends the thread."""
    import time

    from gsexp.view.server import IDLE_S, Viewer
    from gsexp.view.source import Source

    v = Viewer(Source(ground_truth(100), "synthetic"), port=0, device="cpu", height=96, verbose=False)
    try:
        looks, get_clients = [], v.server.get_clients
        v.server.get_clients = lambda: looks.append(1) or get_clients()
        time.sleep(20 * IDLE_S)
        assert looks == [] and not v.has_clients()  # a polling thread would have looked ~20 times
        fake = type("Client", (), {})()  # _greet moves the browser's camera: give it one to move
        fake.atomic, fake.camera = (lambda: __import__("contextlib").nullcontext()), type("Cam", (), {})()
        fake.camera.image_height = 0  # nothing to draw yet
        v._greet(fake)
        assert v.has_clients()
        time.sleep(5 * IDLE_S)
        assert looks, "the thread did not wake when a browser connected"
        v._left(fake)  # viser has already removed it: no clients remain
        assert not v.has_clients()
    finally:
        v.close()
    assert not v._thread.is_alive()


def test_training_with_the_viewer_enabled(tmp_path):
    """train() with viewer.enabled=true and no browser: it trains, serves, closes the server,
    and the final evaluation writes its ground truth | render | error images."""
    from gsexp.config import validate
    from gsexp.train.recipe import train
    from test_train_config import compose_train
    from test_train_run import TINY

    cfg = validate(compose_train(TINY + ["iterations=12", "eval_every=0", "checkpoint_every=0", "viewer.enabled=true",
                                         "viewer.port=0"]))
    summary = train(cfg, tmp_path, Logger(), [])
    assert summary["status"] == "ok" and (tmp_path / "renders" / "test_000_compare.png").is_file()
    assert not [t for t in threading.enumerate() if t.name == "gsexp-viewer"]  # the viewer closed


def test_overhead_script_alternates_blocks_with_the_viewer_off_and_on(tmp_path):
    """experiments/viewer/overhead.py on a tiny finished run: each block trains on from the
    checkpoint, the 'on' blocks with a live server that is closed afterwards."""
    import importlib.util

    from test_train_run import TINY, run_train

    run_train([*TINY, "iterations=12", "checkpoint_every=6", "eval_every=0", "logger=none",
               f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    spec = importlib.util.spec_from_file_location("overhead", REPO / "experiments/viewer/overhead.py")
    overhead = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(overhead)
    result = overhead.main([str(tmp_path / "run"), "--steps", "3", "--rounds", "2", "--json", str(tmp_path / "o.json")])
    assert len(result["ms_per_step"]["off"]) == len(result["ms_per_step"]["on"]) == 2
    assert min(result["ms_per_step"]["off"] + result["ms_per_step"]["on"]) > 0
    assert not [t for t in threading.enumerate() if t.name == "gsexp-viewer"]  # every server closed
    assert (tmp_path / "o.json").is_file()
