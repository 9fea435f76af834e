"""The gsplat training peer (experiments/peers/train_gsplat.py) on the CPU: its simple_trainer loop
with gsplat's real DefaultStrategy (gsplat 1.5.3 imports without CUDA) and a stand-in for
gsplat.rasterization built on gsexp's torch reference, on a tiny synthetic scene."""
import importlib.util
import inspect
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import REPO

sys.path.insert(0, str(REPO / "experiments/peers"))
import gsplat_trainer as trainer  # noqa: E402
import train_gsplat  # noqa: E402
from gsplat_api import PostBackward, count_fused_calls, make_loss, slow_ssim_reasons  # noqa: E402

gsplat = pytest.importorskip("gsplat", reason="gsplat (the test extra) provides the real DefaultStrategy")

from gsexp.gaussians import Gaussians, load_ply  # noqa: E402
from gsexp.render import render  # noqa: E402
from gsexp.render.settings import TorchSettings  # noqa: E402
from gsexp.scene import Camera  # noqa: E402

ITERS, INTERVAL = 40, 8
SCENE = ["--data", "synthetic", "--data-option", "options.num_gaussians=400", "--data-option", "options.num_views=10",
         "--data-option", "options.width=32", "--data-option", "options.height=32",
         "--data-option", "options.num_points=300"]
# DefaultStrategy's schedule shrunk to the run: refine at 10, 20, 30 (500-15K every 100 at 30K); no
# opacity reset inside it (the loss would jump back up), test_opacity_reset_... runs one
STRATEGY = ["--strategy-option", "refine_start_iter=5", "--strategy-option", "refine_every=10",
            "--strategy-option", "reset_every=1000", "--strategy-option", "refine_stop_iter=35",
            "--strategy-option", "grow_grad2d=0.002"]


class Means2d:
    """info["means2d"] ([C,N,2]) as DefaultStrategy uses it: retain_grad() before the backward,
    .grad after. gsexp's reference retains the gradient of its [N,2] screen positions itself."""

    def __init__(self, means2d):
        self.means2d = means2d

    def retain_grad(self):
        pass

    @property
    def grad(self):
        return None if self.means2d.grad is None else self.means2d.grad[None]


def stand_in(calls: list):
    """gsplat.rasterization's signature and outputs (colors [1,H,W,3], alphas [1,H,W,1], info)
    from gsexp's torch reference; logs every call's options."""
    def rasterize(*, means, quats, scales, opacities, colors, viewmats, Ks, width, height, sh_degree, near_plane,
                  far_plane, packed, absgrad, sparse_grad, rasterize_mode, backgrounds):
        calls.append({"sh_degree": sh_degree, "packed": packed, "absgrad": absgrad, "mode": rasterize_mode,
                      "near": near_plane, "far": far_plane, "background": backgrounds,
                      "keys": sorted(k for k in locals() if k not in ("calls", "cam", "K"))})
        K = Ks[0]
        cam = Camera(viewmats[0], K[0, 0], K[1, 1], K[0, 2], K[1, 2], width, height)
        g = Gaussians(means, torch.log(scales), quats, torch.logit(opacities, eps=1e-6), colors, 3)
        bg = (0.0, 0.0, 0.0) if backgrounds is None else tuple(backgrounds[0].tolist())
        out = render(g, cam, TorchSettings(), background=bg, sh_degree=sh_degree)
        info = {"means2d": Means2d(out.means2d), "radii": out.radii[None, :, None].expand(1, -1, 2),
                "width": width, "height": height, "n_cameras": 1, "gaussian_ids": None}
        return out.image.permute(1, 2, 0)[None], out.alpha[None, ..., None], info
    return rasterize


def fake_fused_ssim():
    """A module named fused_ssim with its function's signature (torch SSIM inside): the harness
    must find it and count its calls; on the CPU it still reports the SSIM as slow."""
    from gsexp.metrics import ssim

    module = types.ModuleType("fused_ssim")
    module.fused_ssim = lambda img1, img2, padding="same", train=True: ssim(img1, img2)
    return module


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny images: one thread is as fast, and far faster when other jobs load the cores (measured
    10 steps: 0.4 s against 5.3 s with two threads on a loaded 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def peer_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("peer")
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "fused_ssim", fake_fused_ssim())
        mp.setenv("GSPLAT_COMMIT", "abc123")
        rc = train_gsplat.main([*SCENE, *STRATEGY, "--iters", str(ITERS), "--sh-degree-interval", str(INTERVAL),
                                "--log-every", "1", "--count-at", "10,30", "--device", "cpu", "--allow-slow-ssim",
                                "--out", str(out / "run.json"), "--renders", str(out / "renders"),
                                "--save-ply", str(out / "model.ply")], rasterize=stand_in(calls))
    assert rc == 0
    return json.loads((out / "run.json").read_text()), calls, out


def test_loop_trains_and_follows_simple_trainer_schedules(peer_run):
    record, calls, _ = peer_run
    losses = [h["loss"] for h in record["history"]]
    assert len(losses) == ITERS
    assert np.mean(losses[-5:]) < 0.85 * np.mean(losses[:5])  # measured: 0.75x
    # the degrees the rasterizer got: two warm-up steps (0 and 3), the run, then the test views at 3
    train_calls = calls[2:2 + ITERS]
    assert [c["sh_degree"] for c in calls[:2]] == [0, 3]
    assert [c["sh_degree"] for c in train_calls] == [min(i // INTERVAL, 3) for i in range(ITERS)]
    assert [c["sh_degree"] for c in calls[2 + ITERS:]] == [3] * record["scene"]["test_views"]
    assert record["sh_degree_from_step"] == [[0, 0], [8, 1], [16, 2], [24, 3]]
    assert all(c["packed"] is False and c["absgrad"] is False and c["mode"] == "classic" and c["near"] == 0.01
               and c["far"] == 1e10 and c["background"] is None for c in calls)  # synthetic: black
    # means' lr decays to 0.01x over the run (ExponentialLR), the others stay
    lrs = record["options"]["learning_rates"]
    assert record["final_lr"]["means"] == pytest.approx(0.01 * lrs["means"], rel=1e-5)
    assert lrs["means"] == pytest.approx(1.6e-4 * record["scene"]["scene_scale"])
    assert {k: v for k, v in record["final_lr"].items() if k != "means"} == \
           {"scales": 5e-3, "quats": 1e-3, "opacities": 5e-2, "sh0": 2.5e-3, "shN": 2.5e-3 / 20}
    assert record["options"]["adam"] == {"eps": 1e-15, "betas": [0.9, 0.999], "fused": True}


def test_calls_fit_the_installed_gsplat_rasterization(peer_run):
    """What the harness passes the stand-in, gsplat's own rasterization accepts (1.5.3 here; the
    same keywords exist at 90d7b4b3)."""
    _, calls, _ = peer_run
    signature = inspect.signature(gsplat.rasterization)
    signature.bind(**{k: None for k in calls[0]["keys"]})


def test_strategy_densifies_at_its_refine_steps(peer_run):
    record, _, _ = peer_run
    n = [h["gaussians"] for h in record["history"]]
    assert n[0] == record["init"]["gaussians"] == 300  # the synthetic scene's 300 points
    changed = [i for i in range(1, ITERS) if n[i] != n[i - 1]]
    assert changed and set(changed) <= {10, 20, 30}  # refine_every=10 from step 5, stop at 35
    counts = record["gaussians"]
    assert [(c["step"], c["gaussians"]) for c in counts] == [(s, n[s - 1]) for s in (10, 30, ITERS)]
    assert 0 < counts[0]["seconds"] < counts[1]["seconds"] < counts[2]["seconds"] == record["train_seconds"]
    assert record["opacity_resets"] == []


def test_state_accumulates_and_opacity_reset_as_its_version_does():
    """The strategy's running state after a few steps without refinement: every visible
    Gaussian counted once per view, with a positive screen-space gradient norm. The reset at
    step 2: 1.5.3's condition never fires (a chained comparison), main's does."""
    from gsexp.scene import load_scene
    from gsplat.strategy import DefaultStrategy

    scene = load_scene("synthetic", None, num_gaussians=200, num_views=4, width=24, height=24, num_points=150)
    g = Gaussians.from_points(scene.points, scene.point_colors, sh_degree=3)
    opts = trainer.TrainerOptions(iterations=3, log_every=1, count_at=())
    splats = trainer.splats_of(g, "cpu")
    optimizers = trainer.make_optimizers(splats, scene.extent, opts)
    strategy = DefaultStrategy(reset_every=2)
    state = strategy.initialize_state(scene_scale=scene.extent)
    calls = []
    loss, _ = make_loss(opts.ssim_lambda)
    peer = trainer.Peer(stand_in(calls), strategy, PostBackward(strategy), loss, opts)
    views = trainer.views_of(scene.train_cameras, scene.train_images, "cpu")
    result = trainer.train(peer, splats, optimizers, state, views[:1], scene.extent)
    visible = (render(g, scene.train_cameras[0], TorchSettings()).radii > 0).float()
    assert torch.equal(state["count"] > 0, visible > 0)  # the same view each step: moved Gaussians stay in
    assert state["count"].max() == 3 and (state["grad2d"][visible > 0] > 0).float().mean() > 0.9
    fires = not gsplat.__version__.startswith("1.5")
    assert result["opacity_resets"] == [{"step": 2, "fired": fires}]
    assert (torch.sigmoid(splats["opacities"]).max() <= 0.01) == fires


def test_record_names_versions_options_and_ssim_path(peer_run):
    record, _, _ = peer_run
    v = record["versions"]
    assert v["gsplat"] == gsplat.__version__ and v["gsplat_commit"] == "abc123"
    assert v["fused_ssim_commit"] == "unknown" and v["torch"] == torch.__version__ and v["gpu"] is None
    # gsplat main's ssim_loss skips fused_ssim for CPU tensors; 1.5.3's trainer calls it regardless
    main = importlib.util.find_spec("gsplat.losses") is not None
    source = "gsplat.losses.ssim_loss" if main else "fused_ssim.fused_ssim (called as 1.5.3's simple_trainer does)"
    calls = 0 if main else 2
    assert record["ssim"] == {"source": source, "fused_ssim_importable": True, "device": "cpu",
                              "fused_ssim_calls_in_warmup": calls, "warmup_loss_calls": 2, "fast": False,
                              "allow_slow_ssim": True, "slow_reasons": slow_ssim_reasons(True, "cpu", calls, 2)}
    assert record["options"]["strategy"]["reset_every"] == 1000 and record["options"]["strategy"]["prune_opa"] == 0.005
    assert record["options"]["cli"]["iters"] == ITERS and record["options"]["packed"] is False
    assert record["iterations"] == ITERS and record["peak_gpu_memory_gib"] is None


def test_renders_are_8bit_pngs_of_the_trained_model(peer_run, tmp_path):
    record, _, out = peer_run
    names = sorted(p.name for p in (out / "renders").iterdir())
    assert names == ["view_000.png", "view_008.png"] and record["renders"]["count"] == 2  # every 8th of 10
    from gsexp.scene import load_scene

    scene = load_scene("synthetic", None, num_gaussians=400, num_views=10, width=32, height=32, num_points=300)
    model = load_ply(out / "model.ply")
    psnrs = []
    for cam, ref in zip(scene.test_cameras, scene.test_images):
        png = Image.open(out / "renders" / f"{cam.name}.png")
        assert png.mode == "RGB" and png.size == (32, 32)
        u8 = torch.from_numpy(np.array(png)).float()
        # the saved PLY renders to the same 8-bit image (measured: every pixel; the PLY holds exp'd
        # scales the stand-in took the log of, so allow a level on 1 %), rounded, not truncated
        again = (render(model, cam, TorchSettings(), sh_degree=3).image.clamp(0, 1) * 255).round().permute(1, 2, 0)
        diff = (again - u8).abs()
        assert diff.max() <= 1 and (diff == 0).float().mean() > 0.99
        psnrs.append(-10 * math.log10(((u8 / 255 - ref.permute(1, 2, 0)) ** 2).mean().item()))
    quick = record["renders"]["quick_psnr"]
    assert quick["per_view"] == pytest.approx(dict(zip(["view_000", "view_008"], psnrs)), abs=1e-4)
    assert quick["mean"] > 15 and "not the" in quick["label"]


def test_refuses_without_fused_ssim(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "fused_ssim", None)  # import fused_ssim raises ImportError
    rc = train_gsplat.main([*SCENE, "--iters", "2", "--device", "cpu", "--out", str(tmp_path / "r.json"),
                            "--renders", str(tmp_path / "r")], rasterize=stand_in([]))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "fused_ssim is not importable" in err and "--allow-slow-ssim" in err
    assert not (tmp_path / "r.json").exists()


def test_fallback_of_gsplat_ssim_loss_is_caught():
    """gsplat main's ssim_loss falls back to a torch SSIM where fused_ssim does not apply; the
    harness counts fused_ssim's calls, so such a fallback is reported even on a GPU."""
    fused = fake_fused_ssim()
    main_like = types.SimpleNamespace(l1_loss=lambda a, b: (a - b).abs(),
                                      ssim_loss=lambda a, b: 1 - (a * b).mean())  # never calls fused_ssim
    loss, source = make_loss(0.2, main_like, fused)
    img = torch.rand(1, 16, 16, 3)
    with count_fused_calls(fused) as calls:
        loss(img, img.flip(1)), loss(img, img)
    assert source == "gsplat.losses.ssim_loss" and calls[0] == 0
    assert "fell back" in slow_ssim_reasons(True, "cuda", calls[0], 2)[0]
    assert slow_ssim_reasons(True, "cuda", 2, 2) == []


def test_post_backward_gives_each_splats_its_scene(monkeypatch):
    """gsplat main's step_post_backward takes the GaussianScene simple_trainer builds over its splats;
    the warm-up's copy gets a scene of its own, so its densification never touches the run's."""
    made = []

    class FakeScene:
        @classmethod
        def from_splats(cls, splats, id):
            made.append(splats)
            return (cls, len(made))

    class MainLikeStrategy:
        def step_post_backward(self, params, optimizers, state, step, info, packed=False, scene=None):
            state.append((params, packed, scene))

    monkeypatch.setitem(sys.modules, "gsplat.scene", types.SimpleNamespace(GaussianScene=FakeScene))
    post = PostBackward(MainLikeStrategy())
    run, copy, state = torch.nn.ParameterDict(), torch.nn.ParameterDict(), []
    post.attach(run)
    post(copy, {}, state, 0, {}), post(run, {}, state, 1, {}), post(copy, {}, state, 2, {})
    assert made == [run, copy]
    assert [(p is run, packed, scene[1]) for p, packed, scene in state] == [(False, False, 2), (True, False, 1),
                                                                            (False, False, 2)]
    real = PostBackward(gsplat.strategy.DefaultStrategy())  # 1.5.3's takes no scene, main's does
    assert (real.scene_class is not None) == ("scene" in inspect.signature(real.strategy.step_post_backward).parameters)


@pytest.mark.parametrize("args, message", [
    (["--data", "blender", "--path", "/nonexistent/lego"], "does not exist"),
    (["--data", "blend", "--path", "/tmp"], "Could not find 'data/blend'"),
    (["--experiment", "lego_fast", "--strategy-option", "grow=1"], "DefaultStrategy has no such field"),
    (["--iters", "5"], "no scene"),
    (["--data", "synthetic", "--renders", "{renders_with_a_file}"], "not an empty folder"),
])
def test_bad_input_is_one_line(args, message, capsys, tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old/r_0.png").touch()
    args = [arg.format(renders_with_a_file=tmp_path / "old") for arg in args]
    rc = train_gsplat.main(["--device", "cpu", "--allow-slow-ssim", "--out", str(tmp_path / "r.json"),
                            "--renders", str(tmp_path / "r"), *args], rasterize=stand_in([]))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and message in err


def test_cameras_file_renders_those_views_without_images(tmp_path, monkeypatch):
    """--cameras: lego's 200 test cameras travel where only every 8th test image does; the
    harness renders exactly those cameras, named as they are, and leaves the scoring to score.py."""
    import cameras as camera_file
    from gsexp.scene import load_scene

    scene = load_scene("synthetic", None, num_gaussians=400, num_views=10, width=32, height=32, num_points=300)
    (tmp_path / "cams.json").write_text(camera_file.to_json(scene.train_cameras[:3], "synthetic", "train"))
    monkeypatch.setitem(sys.modules, "fused_ssim", fake_fused_ssim())
    rc = train_gsplat.main([*SCENE, *STRATEGY, "--iters", "2", "--device", "cpu", "--allow-slow-ssim",
                            "--cameras", str(tmp_path / "cams.json"), "--out", str(tmp_path / "run.json"),
                            "--renders", str(tmp_path / "renders")], rasterize=stand_in([]))
    assert rc == 0
    names = sorted(p.name for p in (tmp_path / "renders").iterdir())
    assert names == sorted(f"{c.name}.png" for c in scene.train_cameras[:3])
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["renders"] == {"dir": str(tmp_path / "renders"), "count": 3, "quick_psnr": None}


def test_real_table_pairs_scores_with_each_trainers_record(tmp_path):
    """experiments/peers/real_table.py: per scene and trainer one row per seed (scores from
    score.py, time and count from gsexp's summary or the harness JSON), the means, the ratio."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "peers"))
    import real_table

    def write(path, value):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))

    for seed, (ours, theirs) in enumerate(((22.0, 23.0), (23.0, 22.0))):
        tail = "" if seed == 0 else f"_s{seed}"
        write(tmp_path / "rc/runs" / f"beer_prepared_tcgs_accutile{tail}" / "summary.json",
              {"train_seconds": 50.0 + 10 * seed, "num_gaussians": 1000})
        write(tmp_path / "rc/peer" / f"gsplat_beer_prepared{tail}.json", {"train_seconds": 110.0, "num_gaussians": 900})
        for who, psnr in (("gsexp", ours), ("main", theirs)):
            write(tmp_path / "scores" / f"{who}_beer_prepared{tail}.json",
                  {"views": 9, "mean": {"psnr": psnr, "ssim": 0.9, "lpips_alex": 0.3},
                   "per_view": [{"view": "0000", "psnr": psnr - seed}, {"view": "0008", "psnr": psnr + 3 * seed}]})
    write(tmp_path / "scores" / "main_fern_prepared.json", {"views": 3, "mean": {"psnr": 27.0, "ssim": 0.88}})  # no record
    table = real_table.markdown(real_table.rows(tmp_path))
    assert "| beer_prepared (9) | gsexp | 1 | 60.0 | 1,000 | 23.00 | 0.9000 | 0.3000 |" in table
    assert "| fern_prepared (3) | main | 0 | – | – | 27.00 | 0.8800 | – |" in table
    assert "beer_prepared: gsexp 2.00x gsplat main, +0.00 dB" in table  # 110 / 55, 22.5 - 22.5
    # per view the range over the seeds: gsexp 0000 22 / 22, 0008 22 / 26; main 23 / 21, 23 / 25
    assert "beer_prepared gsexp: 2 seed(s), mean PSNR 22.50 dB, mean train 55.0 s, view spread mean 2.00 max 4.00 dB" in table
    assert "beer_prepared main: 2 seed(s), mean PSNR 22.50 dB, mean train 110.0 s, view spread mean 2.00 max 2.00 dB" in table
    # the layout as committed (experiments/peers/<session>/: study/, runs/) reads the same
    (tmp_path / "rc/runs").rename(tmp_path / "study")
    (tmp_path / "rc/peer").rename(tmp_path / "runs")
    assert real_table.markdown(real_table.rows(tmp_path)) == table


def test_lego_table_reads_only_training_summaries(tmp_path):
    """experiments/peers/table.py: a JSON under runs/ that is no training's summary (fast_recipes'
    hostprof writes a list there) is left out instead of ending the table with a TypeError."""
    import table
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "fast_r1.json").write_text(json.dumps({"train_seconds": 61.0, "num_gaussians": 5}))
    (tmp_path / "runs" / "hostprof_r1.json").write_text(json.dumps([{"at": 100}]))
    (tmp_path / "scores_alex").mkdir()
    (tmp_path / "scores_alex" / "fast_r1.json").write_text(json.dumps(
        {"views": 200, "mean": {"psnr": 35.85, "ssim": 0.98, "lpips_alex": 0.01}}))
    text = table.markdown(table.rows(tmp_path))
    assert "| fast | 1 | 61.0 | 5 | 35.85 | 0.9800 | – | 0.0100 | 200 |" in text
    assert "hostprof" not in text
