"""python -m gsexp.eval and python -m gsexp.export: evaluating any model, the export formats'
round trips (with their stated quantisation tolerances) and the CLIs' user errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image
from plyfile import PlyData

from gsexp import eval as gs_eval
from gsexp import export as gs_export
from gsexp.gaussians import Gaussians, load_ply, make_params, save_ply
from gsexp.gaussians.compressed import morton_order, save_compressed_ply
from gsexp.gaussians.sh import C0
from gsexp.gaussians.splat import ROW, read_splat, splat_order, write_splat
from gsexp.scene.synthetic import ground_truth
from gsexp.train.checkpoint import save_checkpoint

REPO = Path(__file__).resolve().parents[1]
# A small synthetic scene: 8 views of 32x32, every 4th a test view (2 test views).
N_GT, SIZE = 600, 32
SCENE = {"num_gaussians": N_GT, "num_views": 8, "width": SIZE, "height": SIZE, "num_points": 0, "seed": 0}
SCENE_ARGS = ["data=synthetic", "data.test_every=4"] + [f"data.options.{k}={v}" for k, v in SCENE.items()]


def random_gaussians(n: int, degree: int, seed: int = 0) -> Gaussians:
    gen = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    sh = r(n, (degree + 1) ** 2, 3)
    sh[:, 1:] = sh[:, 1:].clamp(-3.9, 3.9)  # the compressed format's SH rest range is [-4, 4)
    return Gaussians(r(n, 3) * 5, r(n, 3) - 4, r(n, 4), r(n) * 3, sh, degree)


def run_cli(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip() and "Warning" not in line]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "error:" in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


# ----------------------------------------------------------------------------- eval

def test_eval_ground_truth_is_exact(tmp_path, capsys):
    """The synthetic scene's own Gaussians, as a PLY, evaluated on its test views."""
    save_ply(ground_truth(N_GT, seed=0), tmp_path / "gt.ply")
    out = tmp_path / "out"
    assert gs_eval.main([str(tmp_path / "gt.ply"), *SCENE_ARGS, "lpips=false", f"out={out}"]) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["num_gaussians"] == N_GT and result["split"] == "test"
    assert result["rasterizer"]["name"] == "torch"
    views = result["per_view"]
    assert [v["view"] for v in views] == ["view_000", "view_004"]
    for v in views:  # the same renderer on the same Gaussians: bit-identical (psnr null = inf)
        assert v["psnr"] is None or v["psnr"] > 60
        assert v["ssim"] > 0.999 and v["lpips"] is None and v["render_ms"] > 0
        with Image.open(out / v["image"]) as im:
            assert im.size == (3 * SIZE, SIZE)  # ground truth | render | error
            pixels = np.asarray(im)
        assert (pixels[:, 2 * SIZE:] == 0).all()  # no error: a black error map
        assert (pixels[:, :SIZE] == pixels[:, SIZE:2 * SIZE]).all()
    assert set(result["mean"]) == {"psnr", "ssim", "lpips", "render_ms"}
    printed = capsys.readouterr().out
    assert "view_004" in printed and "mean" in printed


def make_run_dir(root: Path, g: Gaussians) -> Path:
    """A run directory as train.py leaves it: .hydra/config.yaml and a checkpoint."""
    run = root / "run"
    cfg = {"data": {"kind": "synthetic", "path": None, "downscale": 1, "background": [0.0, 0.0, 0.0],
                    "test_every": 4, "densify_grad_threshold": 0.002, "options": SCENE},
           "rasterizer": {"_target_": "gsexp.render.settings.TorchSettings", "blend": "vanilla"},
           "iterations": 7, "lpips_net": "vgg"}
    (run / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(cfg), run / ".hydra" / "config.yaml")
    save_checkpoint(run, 7, {"step": 7, "params": {k: v.detach() for k, v in make_params(g).items()}})
    return run


def test_eval_run_directory_needs_no_arguments(tmp_path):
    gt = ground_truth(N_GT, seed=0)
    run = make_run_dir(tmp_path, gt)
    assert gs_eval.main([str(run)]) == 0  # data and rasterizer from the run's config
    result = json.loads((run / "eval" / "metrics.json").read_text())
    assert len(result["per_view"]) == 2 and result["num_gaussians"] == N_GT
    assert result["mean"]["ssim"] > 0.999
    assert result["mean"]["lpips"] is None or result["mean"]["lpips"] < 0.01  # auto: when weights exist
    assert gs_eval.main([str(run / "checkpoints" / "step_000007.pt"), "lpips=false"]) == 0
    assert (run / "eval_step_000007" / "metrics.json").is_file()

    # a worse model scores lower, and its error map is no longer black
    blurred = gt.map(lambda t: t.clone())
    blurred.means += 0.03 * torch.randn(N_GT, 3, generator=torch.Generator().manual_seed(1))
    save_ply(blurred, run / "noisy.ply")  # beside the run's config: its defaults apply too
    assert gs_eval.main([str(run / "noisy.ply"), "lpips=false", "split=train"]) == 0
    noisy = json.loads((run / "noisy_eval_train" / "metrics.json").read_text())
    assert len(noisy["per_view"]) == 6 and 15 < noisy["mean"]["psnr"] < 45
    with Image.open(run / "noisy_eval_train" / noisy["per_view"][0]["image"]) as im:
        assert np.asarray(im)[:, 2 * SIZE:].max() > 0


def test_eval_takes_a_run_folder_named_after_overrides(tmp_path):
    """Run folders are named after their overrides ("seed=1,..."): the path is still the model."""
    run = make_run_dir(tmp_path, ground_truth(N_GT, seed=0)).rename(tmp_path / "seed=1,rasterizer=torch")
    assert gs_eval.main([str(run), "lpips=false"]) == 0
    assert (run / "eval" / "metrics.json").is_file()


def test_error_map_scale():
    ref = torch.zeros(3, 2, 2)
    img = torch.tensor([0.0, 0.05, 0.25, 1.0]).reshape(1, 2, 2).expand(3, 2, 2)
    m = gs_eval.error_map(img, ref)
    assert torch.equal(m[:, 0, 0], torch.zeros(3))  # exact: black
    assert torch.allclose(m[:, 0, 1], torch.tensor([0.6, 0.0, 0.0]))  # 0.05 x 4 = 0.2 of full scale: red
    assert torch.equal(m[:, 1, 0], torch.ones(3)) and torch.equal(m[:, 1, 1], torch.ones(3))  # >= 0.25: white


@pytest.mark.parametrize("args, needles", [
    (["{ply}"], ["data=<kind>"]),
    (["{ply}", "data=synthetic", "colour=red"], ["unknown key 'colour'"]),
    (["{ply}", "data=nerf"], ["data=nerf", "blender"]),
    (["{ply}", "data=synthetic", "data.pth=x"], ["data.pth"]),
    (["{ply}", "data=blender", "data.path=/no/such/scene"], ["data.path", "/no/such/scene"]),
    (["{ply}", "data=synthetic", "rasterizer.batch=64"], ["rasterizer.batch", "gemm_gs"]),
    (["{ply}", "data=synthetic", "rasterizer=warp"], ["rasterizer=warp", "tc_gs"]),
    (["{ply}", "data=synthetic", "split=val"], ["split=val"]),
    (["{ply}", "data=synthetic", "lpips=maybe"], ["lpips=maybe"]),
    (["{dir}", "data=synthetic"], ["no checkpoints"]),
    (["{txt}", "data=synthetic"], ["unknown kind of file"]),
    (["{ply}", "{ply}"], ["2 models"]),
])
def test_eval_user_errors(tmp_path, capsys, args, needles):
    save_ply(random_gaussians(10, 0), tmp_path / "m.ply")
    (tmp_path / "notes.txt").write_text("hi")
    names = {"ply": tmp_path / "m.ply", "dir": tmp_path, "txt": tmp_path / "notes.txt"}
    assert gs_eval.main([a.format(**names) for a in args]) == 2
    assert_one_line_error(capsys.readouterr().err, *needles)


def test_eval_cli_bad_path_exits_2():
    proc = run_cli("gsexp.eval", "no/such/model.ply", "data=synthetic")
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "no/such/model.ply", "does not exist")


# ----------------------------------------------------------------------------- export: round trips

def test_ply_round_trip_is_exact(tmp_path):
    g = random_gaussians(300, 3)
    gs_export.export(g, tmp_path / "m.ply", "ply")
    h = load_ply(tmp_path / "m.ply")
    assert h.sh_degree == 3
    for name in Gaussians.TENSORS:
        assert torch.equal(getattr(h, name), getattr(g, name)), name


def chunk_span(x: np.ndarray) -> np.ndarray:
    """Per Gaussian [N, C]: the extent of its chunk (256 consecutive rows) in each column."""
    spans = [np.ptp(x[i:i + 256], 0) for i in range(0, len(x), 256)]
    return np.repeat(np.stack(spans), 256, 0)[:len(x)]


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_compressed_ply_round_trip_within_quantisation(tmp_path, degree):
    g = random_gaussians(700, degree)  # 3 chunks, the last partial
    order = save_compressed_ply(g, tmp_path / "m.compressed.ply")
    assert sorted(order.tolist()) == list(range(700))
    ref, h = g[torch.from_numpy(order)], load_ply(tmp_path / "m.compressed.ply")
    assert len(h) == 700 and h.sh_degree == degree
    names = [e.name for e in PlyData.read(str(tmp_path / "m.compressed.ply")).elements]
    assert names == ["chunk", "vertex"] + (["sh"] if degree else [])

    # position and log-scale: 11/10/11 bits of the chunk's box -> half a step (+ float32 slack)
    steps = np.array([2047, 1023, 2047])
    for name in ("means", "log_scales"):
        x = getattr(ref, name).double().numpy()
        tol = chunk_span(x) / steps / 2 + 1e-5 * (1 + np.abs(x))
        assert (np.abs(getattr(h, name).double().numpy() - x) <= tol).all(), name
    # colour (0.5 + C0 f_dc): 8 bits of the chunk's colour box; opacity: 8 bits of [0, 1]
    rgb = ref.sh[:, 0].double().numpy() * C0 + 0.5
    back = h.sh[:, 0].double().numpy() * C0 + 0.5
    assert (np.abs(back - rgb) <= chunk_span(rgb) / 255 / 2 + 1e-5).all()
    assert (h.opacities - ref.opacities).abs().max() <= 0.5 / 255 + 1e-6
    # rotation: smallest three, 10 bits over [-1/sqrt2, 1/sqrt2] -> the three stored components
    # within half a step (sqrt2 / 1023 / 2 = 6.9e-4), up to the sign of the whole quaternion; the
    # largest, rebuilt from the unit norm (it is >= 1/2), within 3 half steps
    q = ref.quats / ref.quats.norm(dim=1, keepdim=True)
    err = (h.quats * torch.sign((h.quats * q).sum(1, keepdim=True)) - q).abs()
    largest = torch.nn.functional.one_hot(q.abs().argmax(1), 4).bool()
    half_step = 2 ** 0.5 / 1023 / 2
    assert err[~largest].max() <= half_step + 1e-6
    assert err[largest].max() <= 3 * half_step + 1e-6
    # SH rest: 8 bits over [-4, 4), the bucket's midpoint -> within half a bucket
    if degree:
        assert (h.sh[:, 1:] - ref.sh[:, 1:]).abs().max() <= 8 / 256 / 2 + 1e-6


def test_morton_order_makes_chunks_local():
    means = np.random.default_rng(0).uniform(-10, 10, (4096, 3))
    order = morton_order(means)
    volume = chunk_span(means[order]).prod(1).mean()  # 16 chunks: ideally 1/16 of the box each
    assert volume < 0.25 * chunk_span(means).prod(1).mean()


@pytest.mark.parametrize("degree", [0, 2])
def test_splat_round_trip_within_8_bits(tmp_path, degree):
    g = random_gaussians(500, degree)
    g.quats[:4] = torch.tensor([[1.0, 0, 0, 0], [0, -1.0, 0, 0], [0.5, 0.5, 0.5, 0.5], [0, 0, 0, 0]])
    order = write_splat(g, tmp_path / "m.splat")
    assert (tmp_path / "m.splat").stat().st_size == 32 * 500
    ref, s = g[torch.from_numpy(order)], read_splat(tmp_path / "m.splat")
    assert len(s) == 500 and s.sh_degree == 0  # .splat has no SH rest
    # order: the viewer's, size (product of scales) x opacity, largest first
    importance = (ref.log_scales.double().sum(1).exp() / (1 + (-ref.opacity_logits.double()).exp())).numpy()
    assert (np.diff(importance) <= 0).all()
    # positions and (linear) scales: float32, exact
    rows = np.fromfile(tmp_path / "m.splat", ROW)
    assert np.array_equal(rows["position"], ref.means.numpy())
    assert np.array_equal(rows["scale"], ref.log_scales.exp().numpy())
    assert torch.equal(s.means, ref.means)
    assert torch.allclose(s.scales, ref.log_scales.exp(), rtol=1e-6, atol=0)
    # colour and opacity: 8 bits of [0, 1], rounded -> half a level
    rgb = (ref.sh[:, 0] * C0 + 0.5).clamp(0, 1)
    assert ((s.sh[:, 0] * C0 + 0.5) - rgb).abs().max() <= 0.5 / 255 + 1e-6
    assert (s.opacities - ref.opacities).abs().max() <= 0.5 / 255 + 1e-6
    # rotation: 128 q + 128, rounded; +1 clamps to 255 (127/128): within 1/128, else half a level
    q = ref.quats / ref.quats.norm(dim=1, keepdim=True).clamp_min(1e-30)
    q[ref.quats.norm(dim=1) == 0] = torch.tensor([1.0, 0, 0, 0])  # a zero quaternion: the identity
    err = (s.quats - q).abs()
    assert err.max() <= 1 / 128 + 1e-6
    assert err[q * 128 + 128 < 254.5].max() <= 0.5 / 128 + 1e-6


def test_splat_order_is_the_viewers():
    g = random_gaussians(50, 0)
    size_x_opacity = g.log_scales.double().exp().prod(1) * torch.sigmoid(g.opacity_logits.double())
    assert torch.equal(torch.from_numpy(splat_order(g)), torch.argsort(-size_x_opacity.double(), stable=True))


def test_read_splat_rejects_truncated_file(tmp_path):
    write_splat(random_gaussians(3, 0), tmp_path / "m.splat")
    (tmp_path / "cut.splat").write_bytes((tmp_path / "m.splat").read_bytes()[:-5])
    with pytest.raises(ValueError, match="multiple of 32"):
        read_splat(tmp_path / "cut.splat")


# ----------------------------------------------------------------------------- export: the CLI

def test_format_from_out_name():
    assert gs_export.format_of(Path("a/b.compressed.ply"), None) == "compressed-ply"
    assert gs_export.format_of(Path("b.splat"), None) == "splat"
    assert gs_export.format_of(Path("b.ply"), None) == "ply"
    assert gs_export.format_of(Path("b.bin"), "splat") == "splat"
    with pytest.raises(gs_export.UserError, match="--format"):
        gs_export.format_of(Path("b.bin"), None)


def test_export_biker_to_every_format(shared, tmp_path, capsys):
    biker = shared / "data" / "scenes" / "biker.compressed.ply"
    n = len(load_ply(biker))
    outs = {"ply": tmp_path / "biker.ply", "compressed-ply": tmp_path / "biker.compressed.ply",
            "splat": tmp_path / "biker.splat"}
    for fmt, out in outs.items():
        assert gs_export.main([str(biker), "--format", fmt, "--out", str(out)]) == 0
        g = read_splat(out) if fmt == "splat" else load_ply(out)
        assert len(g) == n and g.sh_degree == 0
    assert "152,746 Gaussians" in capsys.readouterr().out
    # the same layout as SuperSplat's own file: 16 bytes per Gaussian + 72 per chunk (+ header)
    assert abs(outs["compressed-ply"].stat().st_size - biker.stat().st_size) < 100
    assert outs["splat"].stat().st_size == 32 * n


def test_export_from_run_directory_and_splat(tmp_path):
    run = make_run_dir(tmp_path, random_gaussians(40, 1))
    assert gs_export.main([str(run), "--out", str(tmp_path / "m.splat")]) == 0
    assert gs_export.main([str(tmp_path / "m.splat"), "--out", str(tmp_path / "back.ply")]) == 0
    assert len(load_ply(tmp_path / "back.ply")) == 40


def test_export_cli_bad_path_exits_2(tmp_path):
    proc = run_cli("gsexp.export", "no/such/run", "--format", "splat", "--out", str(tmp_path / "x.splat"))
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "no/such/run", "does not exist")
    assert not (tmp_path / "x.splat").exists()


def test_export_user_errors(tmp_path, capsys):
    save_ply(random_gaussians(5, 0), tmp_path / "m.ply")
    assert gs_export.main([str(tmp_path / "m.ply"), "--out", str(tmp_path / "m.bin")]) == 2
    assert_one_line_error(capsys.readouterr().err, "--format")
    assert gs_export.main([str(tmp_path / "m.ply"), "--format", "ply", "--out", str(tmp_path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "is a directory")
    (tmp_path / "bad.ply").write_text("not a ply")
    assert gs_export.main([str(tmp_path / "bad.ply"), "--out", str(tmp_path / "x.splat")]) == 2
    assert_one_line_error(capsys.readouterr().err, "bad.ply")
    with pytest.raises(SystemExit) as exit_:  # argparse: a bad --format
        gs_export.main([str(tmp_path / "m.ply"), "--format", "zip", "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2
    assert_one_line_error(capsys.readouterr().err, "zip")


def test_background_writes_finish_before_the_block_ends_and_a_failure_is_raised(tmp_path):
    import threading

    from gsexp.comparison import BackgroundWriter, save_comparison

    img = torch.rand(3, 16, 24)
    threads = set()

    def write(path, ref, image):
        threads.add(threading.get_ident())
        save_comparison(path, ref, image)

    with BackgroundWriter(workers=2) as writer:
        for i in range(6):
            writer.submit(write, tmp_path / f"{i}.png", img, img)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{i}.png" for i in range(6)]
    assert threading.get_ident() not in threads  # written off the caller's thread
    with pytest.raises(FileNotFoundError):
        with BackgroundWriter() as writer:
            writer.submit(save_comparison, tmp_path / "no" / "such" / "dir.png", img, img)
