"""Depth as a picture (issue 38 item 3): the colour map itself, and the depth that gsexp.eval
(depth=true), gsexp.video (--channel depth) and the viewer (Channel: depth) show, each against
the reference render's own out.depth coloured the same way."""
import json

import numpy as np
import pytest
import torch
from PIL import Image

from gsexp.comparison import to_uint8
from gsexp.depth_colors import depth_colors, depth_range
from gsexp.render import make_settings, render
from gsexp.scene.synthetic import ground_truth, ring_cameras
from test_video_live import TINY_SCENE, decoded, run_dir  # noqa: F401  (run_dir: the video tests' run folder)


def test_near_is_red_far_is_blue_and_nothing_drawn_is_black():
    depth = torch.tensor([[1.0, 2.0, 3.0, 9.0]])
    alpha = torch.tensor([[1.0, 1.0, 0.5, 0.0]])
    colors = depth_colors(depth, alpha, near=1.0, far=3.0)
    assert colors.shape == (3, 1, 4)
    near, far = colors[:, 0, 0], colors[:, 0, 2] / 0.5
    from matplotlib import colormaps

    torch.testing.assert_close(near, torch.tensor(colormaps["turbo"](1.0)[:3], dtype=torch.float32))
    torch.testing.assert_close(far, torch.tensor(colormaps["turbo"](0.0)[:3], dtype=torch.float32))
    assert near[0] > 3 * near[2] and far[2] > far[0]  # red, and turbo's dark blue end
    torch.testing.assert_close(colors[:, 0, 1], torch.tensor(colormaps["turbo"](0.5)[:3], dtype=torch.float32),
                               atol=0.01, rtol=0)  # half way: the map's middle (256 levels)
    assert torch.equal(colors[:, 0, 3], torch.zeros(3))  # alpha 0: black, whatever the depth
    # beyond the range clamps to its ends
    assert torch.equal(depth_colors(torch.tensor([[0.0, 5.0]]), torch.ones(1, 2), 1.0, 3.0)[:, 0],
                       torch.stack([colors[:, 0, 0], colors[:, 0, 2] / 0.5], 1))


def test_the_range_is_the_covered_pixels_percentiles():
    gen = torch.Generator().manual_seed(3)
    depth = torch.rand(40, 50, generator=gen) * 10 + 5
    alpha = (torch.rand(40, 50, generator=gen) > 0.3).float()
    alpha[0, 0], depth[0, 0] = 1.0, 1000.0  # one stray far pixel does not stretch the range
    near, far = depth_range(depth, alpha)
    covered = depth[alpha >= 0.5].double().numpy()
    assert near == pytest.approx(np.quantile(covered, 0.02), rel=1e-5)
    assert far == pytest.approx(np.quantile(covered, 0.98), rel=1e-5) and far < 16
    assert depth_range(depth, torch.zeros_like(alpha)) == (0.0, 1.0)  # nothing drawn
    flat = depth_range(torch.full((4, 4), 2.0), torch.ones(4, 4))
    assert flat[0] == 2.0 and flat[1] > 2.0  # a flat depth still has far > near
    with pytest.raises(ValueError, match="far"):
        depth_colors(depth, alpha, near=3.0, far=3.0)
    with pytest.raises(ValueError, match="same"):
        depth_colors(depth, alpha[:, :10])


def expected_picture(gaussians, camera):
    out = render(gaussians, camera, make_settings("torch", depth=True))
    span = depth_range(out.depth, out.alpha)
    return to_uint8(depth_colors(out.depth, out.alpha, *span)), span


def test_eval_writes_each_views_depth_picture(run_dir, tmp_path):
    from gsexp.eval import main
    from gsexp.export import load_model
    from gsexp.scene import load_scene

    out = tmp_path / "eval"
    assert main([str(run_dir / "point_cloud.ply"), "depth=true", f"out={out}", "lpips=false"]) == 0
    scene = load_scene("synthetic", test_every=2, **TINY_SCENE)
    g = load_model(run_dir / "point_cloud.ply")
    rows = json.loads((out / "metrics.json").read_text())["per_view"]
    assert len(rows) == len(scene.test_cameras) == 4
    for row, cam in zip(rows, scene.test_cameras):
        want, span = expected_picture(g, cam)
        got = np.asarray(Image.open(out / row["image"].replace(".png", "_depth.png")))
        assert np.array_equal(got, want) and got.std() > 10  # PNG is lossless: the same bytes
        assert row["depth_range"] == pytest.approx(list(span))
    plain = tmp_path / "plain"
    assert main([str(run_dir / "point_cloud.ply"), f"out={plain}", "lpips=false"]) == 0
    assert not list(plain.glob("*_depth.png")) and "depth_range" not in json.loads(
        (plain / "metrics.json").read_text())["per_view"][0]


def test_eval_refuses_a_bad_depth_value(run_dir, capsys):
    from gsexp.eval import main

    assert main([str(run_dir / "point_cloud.ply"), "depth=maybe"]) == 2
    assert "depth=maybe: use depth=true or depth=false" in capsys.readouterr().err


def test_depth_video_shows_the_depth_in_one_range(run_dir, tmp_path, capsys):
    from gsexp.scene import load_scene
    from gsexp.video import main

    scene = load_scene("synthetic", test_every=2, **TINY_SCENE)
    g = ground_truth(300)
    want, span = expected_picture(g, scene.test_cameras[0])
    out = tmp_path / "depth.mp4"
    assert main([str(run_dir / "point_cloud.ply"), "--path", "test", "--frames", "5", "--channel", "depth",
                 "--out", str(out)]) == 0
    assert f"depth {span[0]:.4g} (red) to {span[1]:.4g} (blue)" in capsys.readouterr().out  # the first frame's
    frames = decoded(out)
    # H.264 halves the colour resolution: 4x4 block means of the first frame, within a few levels
    blocks = lambda a: a.astype(np.float32).reshape(6, 4, 8, 4, 3).mean((1, 3))  # noqa: E731
    assert len(frames) == 5 and np.abs(blocks(frames[0]) - blocks(want)).mean() < 6
    rgb = tmp_path / "rgb.mp4"
    assert main([str(run_dir / "point_cloud.ply"), "--path", "test", "--frames", "5", "--out", str(rgb)]) == 0
    assert np.abs(blocks(decoded(rgb)[0]) - blocks(want)).mean() > 20  # the colour video is another picture
    # a range given: the first frame with it
    fixed = tmp_path / "fixed.mp4"
    assert main([str(run_dir / "point_cloud.ply"), "--path", "test", "--frames", "2", "--channel", "depth",
                 "--depth-range", "0.5", "20", "--out", str(fixed)]) == 0
    out0 = render(g, scene.test_cameras[0], make_settings("torch", depth=True))
    wide = to_uint8(depth_colors(out0.depth, out0.alpha, 0.5, 20.0))
    assert np.abs(blocks(decoded(fixed)[0]) - blocks(wide)).mean() < 6


@pytest.mark.parametrize("args", [["--depth-range", "1", "2"], ["--channel", "depth", "--depth-range", "2", "1"]])
def test_a_depth_range_without_depth_or_reversed_is_a_one_line_error(run_dir, tmp_path, capsys, args):
    from gsexp.video import main

    out = tmp_path / "x.mp4"
    assert main([str(run_dir / "point_cloud.ply"), "--frames", "2", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "FAR must be greater than NEAR" in err and not out.exists()


def test_the_viewer_shows_depth_when_the_channel_says_so():
    from gsexp.view import cameras as cams
    from gsexp.view.controls import stats_text
    from gsexp.view.server import Viewer
    from gsexp.view.source import Source

    views = ring_cameras(4, 64, 64)
    g = ground_truth(600)
    viewer = Viewer(Source(g, "synthetic", train_cameras=views), port=0, device="cpu", height=64, verbose=False)
    try:
        pose = (*cams.pose_of(views[0]), views[0].fov_y, 1.0)
        colour, _ = viewer.render_view(*pose)
        viewer.controls.channel.value = "depth"
        image, stats = viewer.render_view(*pose)
        camera = cams.camera_from_pose(*pose[:3], *cams.resolution(1.0, 64))
        want, span = expected_picture(g, camera)
        assert np.array_equal(image, want) and not np.array_equal(image, colour)
        assert stats["depth_range"] == pytest.approx(span)
        stats.update(frame_ms=10.0, fps=100.0)
        assert f"depth {span[0]:.3g} (red) to {span[1]:.3g} (blue)" in stats_text(stats)
    finally:
        viewer.close()
