"""The 200-view protocol's tools (experiments/peers): cameras without images, 8-bit renders,
and the scorer that gsexp and the peers share."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from gsexp.gaussians import save_ply
from gsexp.scene import load_scene

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "peers"))
import cameras  # noqa: E402
import render_views  # noqa: E402
import score  # noqa: E402

SYNTHETIC = dict(num_gaussians=300, num_views=8, width=64, height=48, test_every=2, num_points=0)


@pytest.fixture(scope="module")
def synthetic():
    return load_scene("synthetic", **SYNTHETIC)


def test_cameras_survive_json_without_their_images(synthetic, tmp_path):
    path = tmp_path / "test.json"
    path.write_text(cameras.to_json(synthetic.test_cameras, synthetic.name, "test"))
    back = cameras.load(path)
    assert len(back) == len(synthetic.test_cameras) == 4
    for a, b in zip(back, synthetic.test_cameras):
        assert torch.equal(a.world_to_camera, b.world_to_camera)
        assert (a.fx, a.fy, a.cx, a.cy, a.width, a.height, a.name) == (b.fx, b.fy, b.cx, b.cy, b.width, b.height, b.name)


def test_cameras_cli_writes_a_split(tmp_path, capsys):
    assert cameras.main(["synthetic", "x", "--split", "train", *[f"--option={k}={v}" for k, v in SYNTHETIC.items()]]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["split"] == "train" and len(data["cameras"]) == 4


def test_renders_of_the_true_model_score_exact(synthetic, tmp_path):
    """The synthetic scene's own Gaussians rendered by render_views.py are its test images to
    the last 8-bit level (PSNR inf, LPIPS 0); one level more everywhere gives the PSNR of that
    error, computed here from the arrays."""
    ply = tmp_path / "gt.ply"
    save_ply(synthetic.meta["ground_truth"], ply)
    (tmp_path / "cams.json").write_text(cameras.to_json(synthetic.test_cameras, "synthetic", "test"))
    out = tmp_path / "renders"
    assert render_views.main([str(ply), "--cameras", str(tmp_path / "cams.json"), "--out", str(out),
                              "--rasterizer", "torch", "--background", "0,0,0"]) == 0
    files = sorted(out.iterdir())
    assert [f.name for f in files] == sorted(f"{c.name}.png" for c in synthetic.test_cameras)
    with Image.open(files[0]) as im:
        assert im.mode == "RGB" and im.size == (64, 48)
    truth = score.ground_truth("synthetic", None, synthetic, {})
    exact = score.score(out, synthetic, truth)
    assert exact["views"] == 4 and all(math.isinf(r["psnr"]) for r in exact["per_view"])
    assert exact["mean"]["lpips_vgg"] < 1e-6 and exact["mean"]["ssim"] == pytest.approx(1.0, abs=1e-6)

    expected = []
    for f in files:  # one level brighter where it can be
        a = np.asarray(Image.open(f)).astype(np.int32)
        b = np.minimum(a + 1, 255)
        Image.fromarray(b.astype(np.uint8)).save(f)
        mse = ((b - a) ** 2).mean() / 255.0 ** 2
        expected.append(10 * math.log10(1 / mse))
    off = score.score(out, synthetic, truth)
    assert [r["psnr"] for r in off["per_view"]] == pytest.approx(expected, abs=1e-3)
    assert off["mean"]["psnr"] == pytest.approx(sum(expected) / 4, abs=1e-3)


def write_rgba_blender(root: Path, n: int = 2, size: int = 64) -> None:
    rng = np.random.default_rng(3)
    for split in ("train", "test"):
        frames = []
        for i in range(n):
            rgba = rng.integers(0, 256, (size, size, 4), dtype=np.uint8)
            rgba[: size // 4, :, 3] = 255  # opaque rows: where float32 x/255*255 may miss x
            (root / split).mkdir(parents=True, exist_ok=True)
            Image.fromarray(rgba, "RGBA").save(root / split / f"r_{i}.png")
            frames.append({"file_path": f"./{split}/r_{i}", "transform_matrix": np.eye(4).tolist()})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": 1.0, "frames": frames}))


def test_blender_ground_truth_is_3dgs_float64_composite_truncated(tmp_path):
    write_rgba_blender(tmp_path)
    scene = load_scene("blender", tmp_path)
    assert scene.meta["random_radius"] == 1.3  # 3DGS's random-init cube for NeRF-synthetic
    truth = score.ground_truth("blender", tmp_path, scene, {})
    for i, t in enumerate(truth):
        norm = np.asarray(Image.open(tmp_path / "test" / f"r_{i}.png")) / 255.0  # 3DGS's readImagesBlender
        arr = norm[:, :, :3] * norm[:, :, 3:4] + np.ones(3) * (1 - norm[:, :, 3:4])
        want = np.array(arr * 255.0, dtype=np.uint8)
        assert np.array_equal(t.permute(1, 2, 0).numpy(), want)


def test_score_refuses_a_missing_or_wrong_sized_render(tmp_path):
    write_rgba_blender(tmp_path)
    scene = load_scene("blender", tmp_path)
    assert scene.meta["random_radius"] == 1.3  # 3DGS's random-init cube for NeRF-synthetic
    truth = score.ground_truth("blender", tmp_path, scene, {})
    renders = tmp_path / "renders"
    renders.mkdir()
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(renders / "r_0.png")
    with pytest.raises(FileNotFoundError, match="r_1"):
        score.score(renders, scene, truth)
    Image.fromarray(np.zeros((8, 64, 3), np.uint8)).save(renders / "r_1.webp", lossless=True)
    with pytest.raises(ValueError, match="r_1"):
        score.score(renders, scene, truth)


def test_one_backbone_per_call_and_the_table_joins_them(tmp_path, capsys):
    """score.py --nets scores LPIPS on the backbones named (a GPU call carries one's weights);
    table.py joins each run's per-backbone folders into one row."""
    write_rgba_blender(tmp_path)
    renders = tmp_path / "peers" / "renders" / "main_r1"
    renders.mkdir(parents=True)
    for i in range(2):
        Image.fromarray(np.full((64, 64, 3), 200, np.uint8)).save(renders / f"r_{i}.png")
    for net in score.NETS:
        out = tmp_path / "peers" / f"scores_{net}" / "main_r1.json"
        out.parent.mkdir()
        assert score.main([str(renders), "blender", str(tmp_path), "--nets", net, "--out", str(out)]) == 0
        assert [k for k in json.loads(out.read_text())["mean"] if k.startswith("lpips")] == [f"lpips_{net}"]
    with pytest.raises(SystemExit):
        score.main([str(renders), "blender", str(tmp_path), "--nets", "squeeze"])
    assert "--nets: unknown backbone(s) ['squeeze']" in capsys.readouterr().err

    import table
    (tmp_path / "peers" / "runs").mkdir()
    (tmp_path / "peers" / "runs" / "main_r1.json").write_text(json.dumps({"train_seconds": 12.5, "num_gaussians": 7}))
    (row,) = table.rows(tmp_path / "peers")
    assert row["trainer"] == "main" and row["round"] == "1" and row["views"] == 2
    assert {"psnr", "ssim", "lpips_vgg", "lpips_alex"} <= row.keys()
    assert "| main | 1 | 12.5 | 7 |" in table.markdown([row])


def test_render_table_orders_scenes_and_divides_by_our_rows(tmp_path):
    """render_table.py: one row per bench JSON, biker before lego sizes, 1080p before 4K, and each
    peer's ms divided by each of our two rows (above 1: gsexp faster)."""
    import render_table

    def bench(name, n, res, ms):
        rows = [{"name": k, "e2e": {"median": v}} for k, v in ms.items()]
        cfg = {"num_gaussians": n, "resolution": res, "device_name": "GPU", "torch": "2", "warmup": 5,
               "frames": 10, "rounds": 3, "cameras": {"count": 4}}
        (tmp_path / f"{name}_{res}.json").write_text(json.dumps({"config": cfg, "rasterizers": rows}))

    ours = dict(zip(render_table.OURS, (2.0, 1.0)))
    bench("lego_3M", 3_000_000, "3840x2160", ours | {"gsplat 1.6.0": 4.0, "HiGS": 0.5})
    bench("lego_3M", 3_000_000, "1920x1080", ours | {"gsplat 1.6.0": 3.0, "HiGS": 0.5})
    bench("biker", 152_746, "1920x1080", ours | {"gsplat 1.6.0": 1.0, "HiGS": 0.25})
    lines = render_table.table(tmp_path)
    body = [line for line in lines if line.startswith("| ") and "Gaussians" not in line]
    assert [line.split(" | ")[:3] for line in body] == [
        ["| biker", "152,746", "1920x1080"], ["| lego_3M", "3,000,000", "1920x1080"],
        ["| lego_3M", "3,000,000", "3840x2160"]]
    assert body[1].endswith("| 1.50× | 3.00× | 0.25× | 0.50× |")
    assert render_table.table(tmp_path / "none") == [f"{tmp_path / 'none'}: no render JSON"]


def test_profile_render_lists_where_a_frame_goes(synthetic, tmp_path, capsys):
    """profile_render.py on the CPU profiles the torch reference's ops (on a GPU: the kernels)."""
    import profile_render

    save_ply(synthetic.meta["ground_truth"], tmp_path / "g.ply")
    out = tmp_path / "p.json"
    assert profile_render.main(["--ply", str(tmp_path / "g.ply"), "--width", "64", "--height", "48",
                                "--num-cameras", "2", "--rasterizers", "torch", "--warmup", "1",
                                "--frames", "2", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())["rasterizers"]["torch"]
    assert rep["total_ms"] > 0 and rep["kernels"] == len(rep["top"]) > 3
    assert "ms of CPU ops per frame" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        profile_render.main(["--ply", str(tmp_path / "missing.ply")])
    with pytest.raises(SystemExit):
        profile_render.main(["--ply", str(tmp_path / "g.ply"), "--rasterizers", "torch:blend=fastest"])
    assert "--rasterizers 'torch:blend=fastest'" in capsys.readouterr().err


def test_each_scores_every_folder_once_with_one_load(tmp_path, capsys, monkeypatch):
    """score.py --each: every render folder under the root into OUT_DIR/<name>.json, as the
    one-folder call scores it; folders already scored are skipped, a broken one is reported
    without stopping the rest, and the scene loads once."""
    write_rgba_blender(tmp_path)
    root = tmp_path / "renders"
    for name, level in (("a_r1", 200), ("b_r1", 90), ("broken_r1", 0)):
        (root / name).mkdir(parents=True)
        for i in range(2 if name != "broken_r1" else 1):  # broken: its second view is missing
            Image.fromarray(np.full((64, 64, 3), level, np.uint8)).save(root / name / f"r_{i}.png")
    loads = []
    real_load = score.load_scene
    monkeypatch.setattr(score, "load_scene", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    out = tmp_path / "scores"
    assert score.main([str(root), "blender", str(tmp_path), "--nets", "alex", "--each", str(out)]) == 1
    assert len(loads) == 1 and sorted(p.name for p in out.iterdir()) == ["a_r1.json", "b_r1.json"]
    printed = capsys.readouterr()
    assert "broken_r1" in printed.err and "r_1" in printed.err and "Traceback" not in printed.err
    assert printed.out.count("| a_r1 | 2 |") == 1 and "| b_r1 | 2 |" in printed.out
    single = tmp_path / "single.json"
    assert score.main([str(root / "b_r1"), "blender", str(tmp_path), "--nets", "alex", "--out", str(single)]) == 0
    assert json.loads(single.read_text())["mean"] == json.loads((out / "b_r1.json").read_text())["mean"]
    capsys.readouterr()
    (root / "broken_r1" / "r_1.png").write_bytes((root / "a_r1" / "r_1.png").read_bytes())
    assert score.main([str(root), "blender", str(tmp_path), "--nets", "alex", "--each", str(out)]) == 0
    assert capsys.readouterr().out.count("|") == 6  # only the mended folder: one row
    with pytest.raises(SystemExit):
        score.main([str(root), "blender", str(tmp_path), "--each", str(out), "--out", str(single)])
    assert "drop --out and --label" in capsys.readouterr().err
