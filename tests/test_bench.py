"""The render benchmark on the CPU: figures in the JSON, PSNR between rasterizers, inputs
(PLY, trainer checkpoint) and their errors, spec parsing, orbit framing."""
import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from gsexp.bench.cameras import orbit_cameras
from gsexp.bench.cli import main
from gsexp.bench.rasterizers import parse_rasterizer
from gsexp.gaussians import save_ply
from gsexp.render.settings import TcGsSettings, TorchSettings
from gsexp.train.checkpoint import save_checkpoint
from gsexp.gaussians import make_params
from render_helpers import random_scene

SMALL = ["--width", "64", "--height", "48", "--num-cameras", "2", "--up", "z", "--device", "cpu",
         "--no-gsplat"]
TIMED = ["--warmup", "1", "--frames", "2"]
ONCE = ["--warmup", "0", "--frames", "1"]  # where only the images or errors matter


@pytest.fixture
def scene(tmp_path):
    g, _ = random_scene(0, n=200, sh_degree=1)
    save_ply(g, tmp_path / "scene.ply")
    return g, tmp_path / "scene.ply"


def test_two_torch_rasterizers(scene, tmp_path, capsys):
    _, ply = scene
    report = main(["--ply", str(ply), "--rasterizers", "torch,torch", "--json", str(tmp_path / "b.json"),
                   *SMALL, *TIMED])
    data = json.loads((tmp_path / "b.json").read_text())
    assert data == json.loads(json.dumps(report))
    rows = data["rasterizers"]
    assert [r["name"] for r in rows] == ["torch", "torch"]
    for r in rows:
        assert set(r["stages"]) == {"preprocess", "duplicate", "sort", "ranges", "blend"}
        assert r["settings"]["variant"] == "torch" and r["settings"]["blend"] == "vanilla"
        assert all(s["median"] > 0 and s["p90"] >= s["median"] for s in r["stages"].values())
        assert r["e2e"]["median"] > 0 and r["frames"] == 4  # 2 cameras x 2 frames
    assert rows[0]["psnr"] is None  # the reference row
    psnr = float(rows[1]["psnr"])
    assert math.isinf(psnr) or psnr > 100
    config = data["config"]
    assert config["num_gaussians"] == 200 and config["resolution"] == "64x48"
    assert config["cameras"]["count"] == 2 and config["torch"] == torch.__version__
    out = capsys.readouterr().out
    assert "e2e med" in out and "gsplat: skipped" in out


def test_rounds_interleave_and_gather_frames(scene, monkeypatch):
    """--rounds runs the whole set again in turn (A B, A B) and every round's frames count."""
    from gsexp.bench import timing

    order, real = [], timing.bench_one
    monkeypatch.setattr(timing, "bench_one", lambda r, *a, **k: order.append(r.name) or real(r, *a, **k))
    _, ply = scene
    report = main(["--ply", str(ply), "--rasterizers", "torch,torch:precision=fp32", "--rounds", "3",
                   *SMALL, *TIMED])
    assert order == ["torch", "torch:precision=fp32"] * 3
    assert [r["frames"] for r in report["rasterizers"]] == [12, 12]  # 3 rounds x 2 cameras x 2 frames
    assert report["config"]["rounds"] == 3
    assert all(len(r["stages"]) >= 4 for r in report["rasterizers"])


def test_rounds_must_be_positive(scene, capsys):
    _, ply = scene
    with pytest.raises(SystemExit):
        main(["--ply", str(ply), "--rounds", "0", *SMALL, *ONCE])
    assert "--rounds" in capsys.readouterr().err


def test_checkpoint_renders_like_the_ply(scene, tmp_path):
    g, ply = scene
    payload = {"step": 7, "params": {k: v.detach() for k, v in make_params(g).items()}}
    ckpt = save_checkpoint(tmp_path / "run", 7, payload)
    main(["--ply", str(ply), "--save-images", str(tmp_path / "a"), *SMALL, *ONCE])
    report = main(["--checkpoint", str(ckpt), "--save-images", str(tmp_path / "b"), *SMALL, *ONCE])
    assert report["config"]["sh_degree"] == 1 and report["config"]["num_gaussians"] == 200
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert len(names) == 2 and names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        a, b = (np.asarray(Image.open(tmp_path / d / name)) for d in ("a", "b"))
        assert np.array_equal(a, b) and a.max() > 0  # something was drawn
    # A run directory stands for its newest checkpoint.
    assert main(["--checkpoint", str(tmp_path / "run"), *SMALL, *ONCE])["config"]["num_gaussians"] == 200


@pytest.mark.parametrize("flag", ["--ply", "--checkpoint"])
def test_missing_input_names_flag_and_path(tmp_path, capsys, flag):
    missing = tmp_path / "nowhere" / "scene.file"
    with pytest.raises(SystemExit):
        main([flag, str(missing), *SMALL, *ONCE])
    err = capsys.readouterr().err
    assert flag in err and str(missing) in err


NEEDS_CUDA = "needs --device cuda" if torch.cuda.is_available() else "needs a GPU"  # SMALL runs on the CPU


def test_bad_rasterizer_spec_fails_naming_it(scene, capsys):
    _, ply = scene
    cases = {"torch:colour=red": "no switch 'colour'", "nosuch": "unknown rasterizer",
             "torch:blend=nosuch": "not one of", "torch:tcgs": "key=value",
             "torch:precision=fp16": "precision",  # vanilla's blend is fp32
             "vanilla:precision=fp16": "gemm_gs, tc_gs",  # the variants that have the switch
             "tc_gs": NEEDS_CUDA, "gsplat": NEEDS_CUDA, "gsplat_higs": NEEDS_CUDA,
             "gsplat_higs:tile_size=16": "takes no settings"}
    for spec, problem in cases.items():
        with pytest.raises(SystemExit):
            main(["--ply", str(ply), "--rasterizers", spec, *SMALL, *ONCE])
        err = capsys.readouterr().err
        assert spec in err and problem in err, (spec, err)


def test_parse_rasterizer():
    assert parse_rasterizer("torch").settings == TorchSettings()
    spec = parse_rasterizer("torch:blend=tcgs:precision=fp16:g2l=false:sh_degree=0")
    assert spec.settings == TorchSettings(blend="tcgs", precision="fp16", g2l=False) and spec.sh_degree == 0
    assert spec.record() == {"variant": "torch", "backend": "torch", **spec.settings.switches(), "sh_degree": 0}
    spec = parse_rasterizer("tc_gs:intersect=accutile:batch=64")
    assert spec.settings == TcGsSettings(intersect="accutile", batch=64) and spec.sh_degree is None
    assert parse_rasterizer("gsplat").settings is None
    assert parse_rasterizer("gsplat_higs:sh_degree=1").sh_degree == 1
    with pytest.raises(ValueError, match="key=value"):
        parse_rasterizer("torch:blend=gemm:fp16")
    with pytest.raises(ValueError, match="true or false"):
        parse_rasterizer("tc_gs:g2l=1")


def test_sh_degree_spec_renders_fewer_bands(scene):
    _, ply = scene
    report = main(["--ply", str(ply), "--rasterizers", "torch,torch:sh_degree=0", *SMALL, *ONCE])
    rows = report["rasterizers"]
    assert rows[1]["settings"]["sh_degree"] == 0 and "sh_degree" not in rows[0]["settings"]
    assert rows[1]["psnr"] != "inf" and rows[1]["psnr"] < 100  # degree 1 -> 0 changes the colours


def test_orbit_frames_the_scene():
    gen = torch.Generator().manual_seed(1)
    means = torch.randn(2000, 3, generator=gen) * torch.tensor([1.0, 0.5, 0.2])
    means += torch.tensor([5.0, -3.0, 2.0])
    means[:20] += 1000.0  # strays must not shrink the scene to a dot
    cams, _ = orbit_cameras(means, 4, 80, 60, up=torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    for cam in cams:
        view = means @ cam.world_to_camera[:3, :3].T + cam.world_to_camera[:3, 3]
        x = cam.fx * view[:, 0] / view[:, 2] + cam.cx
        y = cam.fy * view[:, 1] / view[:, 2] + cam.cy
        inside = (view[:, 2] > 0) & (x >= 0) & (x < 80) & (y >= 0) & (y < 60)
        assert inside.float().mean() > 0.85
        assert (x[inside].max() - x[inside].min()) > 0.3 * 60  # and it is not tiny
