"""Sweeps: the GPU pool, the results table, the dashboard, and tiny multiruns on every launcher."""
import json
import multiprocessing as mp
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from PIL import Image

from gsexp.dashboard import PLOTS, pareto_front
from gsexp.sweep import gpu_pool
from gsexp.sweep.results import collect, read_csv, summarize
from pool_worker import pool_job
from test_train_config import compose_train
from test_train_run import run_train


# --- GPU pool ------------------------------------------------------------------------------------

def run_pool_jobs(tmp_path, devices, workers, reps, slots=1) -> list[dict]:
    """`workers` processes started together, each running `reps` pool jobs; their records."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=pool_job, args=(tmp_path / "locks", devices, tmp_path, j, reps, barrier, slots))
             for j in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]


def most_at_once(runs: list[dict], device: str) -> int:
    """The most jobs that held `device` at the same moment (counted at each job's start)."""
    on = [r for r in runs if r["device"] == device]
    return max(sum(1 for o in on if o["start"] <= r["start"] < o["end"]) for r in on)


def test_pool_gives_each_running_job_its_own_device(tmp_path, monkeypatch):
    monkeypatch.delenv(gpu_pool.PINNED_ENV, raising=False)
    devices = ["3", "5"]  # fake device ids: the pool only hands out names
    runs = run_pool_jobs(tmp_path, devices, workers=4, reps=3)
    assert len(runs) == 12 and {r["device"] for r in runs} == set(devices)
    for r in runs:
        assert r["visible"] == r["device"]  # the job sees only its device
    for a in runs:  # no two jobs on one device at the same time
        for b in runs:
            if a is not b and a["device"] == b["device"]:
                assert a["end"] <= b["start"] or b["end"] <= a["start"]
    by_pid = {}
    for r in runs:  # a worker keeps the device of its first job (CUDA reads the env once)
        by_pid.setdefault(r["pid"], set()).add(r["device"])
    assert all(len(d) == 1 for d in by_pid.values())


def test_pool_packs_jobs_per_gpu_on_one_device(tmp_path, monkeypatch):
    """jobs_per_gpu=2 on one (fake) GPU: three workers contend, two run at once, never three."""
    monkeypatch.delenv(gpu_pool.PINNED_ENV, raising=False)
    runs = run_pool_jobs(tmp_path, ["7"], workers=3, reps=2, slots=2)
    assert len(runs) == 6 and all(r["device"] == r["visible"] == "7" for r in runs)
    assert most_at_once(runs, "7") == 2


def test_gpus_launcher_hands_jobs_per_gpu_to_the_pool(monkeypatch, capsys):
    from hydra_plugins.gsexp_gpu_pool.gpu_pool_launcher import GpuPoolLauncher

    monkeypatch.delenv(gpu_pool.SLOTS_ENV, raising=False)
    assert gpu_pool.jobs_per_gpu() == 1
    GpuPoolLauncher(jobs_per_gpu=3, n_jobs=2)
    assert gpu_pool.jobs_per_gpu() == 3
    with pytest.raises(SystemExit) as exit:  # one line on stderr, exit status 2
        GpuPoolLauncher(jobs_per_gpu=0)
    assert exit.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_pool_without_devices_runs_on_the_cpu(tmp_path, monkeypatch):
    monkeypatch.delenv(gpu_pool.PINNED_ENV, raising=False)
    with gpu_pool.claim(tmp_path, []) as device:
        assert device is None


def test_a_jobs_inputs_load_without_starting_cuda(monkeypatch):
    """train.py reads a job's scene and PLY before the job claims its GPU, and the claim refuses once
    CUDA has started (CUDA_VISIBLE_DEVICES no longer selects then). On the H100 every job of a
    hydra/launcher=gpus sweep failed so: the inputs' RNG state read the CUDA generators. Here torch
    is told a GPU exists and starting CUDA raises."""
    import torch

    from gsexp.config import check_machine, validate
    from gsexp.train.setup import load_inputs
    from test_train_run import TINY

    def started():
        raise AssertionError("CUDA was started before the job claimed its GPU")

    cfg = validate(compose_train([*TINY, "rasterizer=torch"]))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for module in (torch.cuda, torch.cuda.random):  # the RNG functions hold their own references
        monkeypatch.setattr(module, "device_count", lambda: 1)
        monkeypatch.setattr(module, "_lazy_init", started)
    check_machine(cfg)
    inputs = load_inputs(cfg, None)
    assert len(inputs.scene.train_cameras) > 0 and "cuda" not in inputs.rng


# --- results table and dashboard ----------------------------------------------------------------

def fake_sweep(root: Path) -> Path:
    jobs = [
        (["rasterizer.blend=gemm", "seed=0"], {"status": "ok", "psnr": 30.0, "ssim": 0.9, "lpips": 0.1,
                                               "render_ms": 2.0, "stage_ms": {"blend": 1.5, "sort": 0.5}}),
        (["rasterizer.blend=gemm", "seed=1"], {"status": "ok", "psnr": 31.0, "ssim": 0.92, "lpips": 0.08,
                                               "render_ms": 2.2, "stage_ms": {"blend": 1.6, "sort": 0.6}}),
        (["rasterizer.blend=tcgs", "seed=0"], {"status": "ok", "psnr": 29.0, "ssim": 0.88, "lpips": 0.12,
                                               "render_ms": 1.0, "stage_ms": {"blend": 0.6, "sort": 0.4}}),
        (["rasterizer.blend=vanilla", "seed=0"], {"status": "failed", "error": "RuntimeError: boom"}),
    ]
    for i, (overrides, summary) in enumerate(jobs):
        job = root / f"{i}_{','.join(overrides)}"
        (job / ".hydra").mkdir(parents=True)
        (job / "summary.json").write_text(json.dumps({**summary, "overrides": overrides}))
    killed = root / "4_rasterizer.blend=vanilla,seed=1" / ".hydra"
    killed.mkdir(parents=True)
    (killed / "overrides.yaml").write_text("- rasterizer.blend=vanilla\n- seed=1\n")
    return root


def test_results_table_rows_seeds_and_failures(tmp_path):
    rows = summarize(fake_sweep(tmp_path))
    assert [r["job"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "failed", "missing"]
    assert rows[0]["variant"] == "rasterizer.blend=gemm" and rows[1]["seed"] == "1"
    assert rows[0]["stage_ms/blend"] == 1.5
    back = read_csv(tmp_path / "results.csv")
    assert len(back) == 5 and back[1]["psnr"] == 31.0 and back[4]["status"] == "missing"
    md = (tmp_path / "results.md").read_text()
    assert "30.5 ± 0.71" in md  # gemm over two seeds
    assert "RuntimeError: boom" in md and "missing" in md


def test_gpu_sharing_check_from_the_jobs_records(tmp_path):
    """results.md reports how many pool jobs ran at once on one GPU, from their start/end
    times and nvidia-smi's UUIDs; a shared GPU shows up."""
    from gsexp.sweep.results import collect, gpu_sharing

    def sweep(name, jobs):
        root = tmp_path / name
        for i, (uuid, start, end) in enumerate(jobs):
            job = root / f"{i}_job"
            job.mkdir(parents=True)
            (job / "summary.json").write_text(json.dumps(
                {"status": "ok", "gpu": str(i % 2), "gpu_uuid": uuid, "gpu_seen": [uuid], "started": start,
                 "ended": end}))
        return root

    apart = sweep("apart", [("GPU-a", 0, 10), ("GPU-b", 1, 9), ("GPU-a", 10, 20), ("GPU-b", 9, 30)])
    assert gpu_sharing(collect(apart)) == ("4 pool jobs on 2 GPU(s); at most 1 ran at once on one GPU; nvidia-smi saw "
                                           "4 of 4 jobs on their claimed GPU only. Wall time 30 s from the first "
                                           "job's start to the last one's end; the jobs' own times add up to 49 s "
                                           "(1.63 at a time on average).")
    shared = sweep("shared", [("GPU-a", 0, 10), ("GPU-a", 5, 15)])
    assert "at most 2 ran at once" in gpu_sharing(collect(shared))
    # two slots: the middle job overlaps two that ran one after the other, never three at once
    slots = sweep("slots", [("GPU-a", 0, 10), ("GPU-a", 5, 15), ("GPU-a", 12, 20)])
    assert "at most 2 ran at once" in gpu_sharing(collect(slots))
    # shared GPUs slow each job: the speed columns get a warning, the apart sweep none
    assert "compare speed with jobs_per_gpu=1" in gpu_sharing(collect(shared))
    assert "jobs_per_gpu" not in gpu_sharing(collect(apart))
    assert gpu_sharing(collect(fake_sweep(tmp_path / "cpu"))) == ""  # no pool jobs: nothing to say


def test_pareto_front():
    pts = [{"render_ms": 1.0, "psnr": 29.0}, {"render_ms": 2.0, "psnr": 30.5}, {"render_ms": 3.0, "psnr": 30.0},
           {"render_ms": 0.5, "psnr": 20.0}]
    assert [p["render_ms"] for p in pareto_front(pts, "psnr", True)] == [0.5, 1.0, 2.0]
    lp = [{"render_ms": 1.0, "lpips": 0.2}, {"render_ms": 2.0, "lpips": 0.1}, {"render_ms": 3.0, "lpips": 0.3}]
    assert [p["render_ms"] for p in pareto_front(lp, "lpips", False)] == [1.0, 2.0]


def test_pareto_front_on_training_time():
    """The training recipes' frontier: the same rule with train_seconds as the time."""
    pts = [{"train_seconds": 60.0, "psnr": 35.6}, {"train_seconds": 30.0, "psnr": 35.5},
           {"train_seconds": 45.0, "psnr": 35.4}, {"train_seconds": 20.0, "psnr": None}]
    assert [p["train_seconds"] for p in pareto_front(pts, "psnr", True, x="train_seconds")] == [30.0, 60.0]


def check_dashboard(sweep_dir: Path, rows: list[dict]):
    from gsexp.dashboard import main

    page = main([str(sweep_dir)])
    html = page.read_text()
    for name in PLOTS:
        with Image.open(page.parent / name) as im:
            im.load()
            assert im.size[0] > 200 and im.size[1] > 100
        assert f'src="{name}"' in html
    for r in rows:
        assert f"<td>{r['overrides']}</td>" in html


def test_dashboard_on_a_fabricated_sweep(tmp_path):
    check_dashboard(fake_sweep(tmp_path), collect(tmp_path))


def test_dashboard_logs_table_and_charts_to_wandb_offline(tmp_path, monkeypatch):
    from gsexp.dashboard import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / var.lower()))
    sweep = fake_sweep(tmp_path / "sweep")
    main([str(sweep), "--wandb"])
    (run,) = (sweep / "dashboard" / "wandb").glob("offline-run-*")
    tables = [p.name for p in run.glob("files/media/table/*.table.json")]
    assert any(t.startswith("results_") for t in tables)  # the whole table
    assert any(t.startswith(("quality_vs_speed", "psnr_by_variant")) for t in tables)  # the charts' data
    assert len(list(run.glob("files/media/images/*.png"))) == len(PLOTS)
    assert f"sweep-{sweep.name}".encode() in next(run.glob("run-*.wandb")).read_bytes()


# --- tiny multiruns ------------------------------------------------------------------------------

def sweep_dir_of(root: Path) -> Path:
    (sweep,) = (root / "multirun").iterdir()
    return sweep


@pytest.mark.slow
def test_tiny_2x2_sweep_with_joblib(tmp_path):
    """experiment=ablation_rasterizer_tiny (blend x precision) through the joblib launcher, wandb offline.
    100 of its 300 steps: the plumbing is the test (300 took this test to ~150 s of CI's 2 cores)."""
    run_train(["-m", "experiment=ablation_rasterizer_tiny", "hydra.launcher.n_jobs=2", "logger=wandb",
               "eval_lpips=false", "iterations=100"], tmp_path)
    sweep = sweep_dir_of(tmp_path)
    rows = read_csv(sweep / "results.csv")
    assert sorted(r["variant"] for r in rows) == sorted(
        f"rasterizer.blend={b} rasterizer.precision={p}" for b in ("gemm", "tcgs") for p in ("fp32", "fp16"))
    assert all(r["status"] == "ok" and r["psnr"] > 5 and r["render_ms"] > 0 for r in rows)
    assert all(r["stage_ms/blend"] > 0 for r in rows)
    assert "| job | variant |" in (sweep / "results.md").read_text()
    for job in sweep.iterdir():
        if not (job / ".hydra").is_dir():
            continue
        (record,) = job.glob("wandb/offline-run-*/run-*.wandb")
        data = record.read_bytes()  # the run record holds the group; history records the keys
        assert f"sweep-{sweep.name}".encode() in data
        for key in (b"train/loss", b"eval/psnr", b"eval/render_ms"):
            assert key in data, key
    check_dashboard(sweep, read_csv(sweep / "results.csv"))


@pytest.mark.slow
def test_sweep_lists_failed_and_invalid_jobs(tmp_path):
    """Of four jobs, one fails at run time (init from points, the scene has none), two are
    invalid combinations (vanilla in fp16) and never start, one trains."""
    from test_train_run import TINY

    tiny = [o for o in TINY if "num_points" not in o]
    run_train(["-m", "data.options.num_points=0,200", "model.init=points", "rasterizer.blend=vanilla,tcgs",
               "rasterizer.precision=fp16", *tiny, "iterations=10"], tmp_path)
    rows = read_csv(sweep_dir_of(tmp_path) / "results.csv")
    status = {r["variant"]: r["status"] for r in rows}
    assert status == {"data.options.num_points=0 rasterizer.blend=vanilla": "invalid",
                      "data.options.num_points=0 rasterizer.blend=tcgs": "failed",
                      "data.options.num_points=200 rasterizer.blend=vanilla": "invalid",
                      "data.options.num_points=200 rasterizer.blend=tcgs": "ok"}
    md = (sweep_dir_of(tmp_path) / "results.md").read_text()
    assert "no SfM points" in md and "the vanilla formula is fp32" in md


@pytest.mark.parametrize("launcher", ["gpus", "slurm", "joblib", "submitit_local"])
def test_launcher_configs_compose(launcher):
    cfg = compose_train([f"hydra/launcher={launcher}", "experiment=seeds_tiny"], hydra=True)
    assert cfg.hydra.launcher._target_
    if launcher == "gpus":
        launcher = OmegaConf.to_container(cfg.hydra.launcher)  # n_jobs's resolver is train.py's
        assert launcher["jobs_per_gpu"] == 1 and "jobs_per_gpu" in launcher["n_jobs"]
    if launcher == "slurm":
        assert cfg.hydra.launcher.gpus_per_node == 1 and cfg.hydra.launcher.array_parallelism == 16
        assert "partition" in cfg.hydra.launcher and cfg.hydra.launcher.timeout_min > 0


@pytest.mark.slow
def test_submitit_local_runs_two_tiny_jobs(tmp_path):
    from test_train_run import TINY

    run_train(["-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10", *TINY, "iterations=10",
               "seed=0,1"], tmp_path)
    rows = read_csv(sweep_dir_of(tmp_path) / "results.csv")
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)


def test_jobs_per_gpu_table_reads_each_sweep(tmp_path):
    """experiments/multi_gpu_sweep/jobs_per_gpu_table.py: one row per jobs_per_gpu sweep, the wall
    time from the first start to the last end, failed jobs counted but not averaged."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "multi_gpu_sweep"))
    import jobs_per_gpu_table

    for folder, k, starts in (("k1", "1", (0, 10, 20, 30)), ("k2", "2", (0, 0, 10, 10)), ("mps_k2", "2", (0, 0, 5, 5))):
        for i, t in enumerate(starts):
            d = tmp_path / folder / f"{i}_seed={i}"
            d.mkdir(parents=True)
            d.joinpath("summary.json").write_text(json.dumps(
                {"status": "ok", "started": 1000.0 + t, "ended": 1010.0 + t, "train_seconds": 9.0 + int(k),
                 "psnr": 30.0 + i, "peak_memory_mb": 500.0 * int(k), "pair_overflows": i * (folder == "k2"),
                 "overhead_s": {"to_first_step": 0.5, "after_last_step": 0.25}}))
    (tmp_path / "k2" / "9_bad").mkdir()
    (tmp_path / "k2" / "9_bad" / "summary.json").write_text(json.dumps({"status": "failed", "error": "boom"}))
    (tmp_path / "k4" / "0_seed=0").mkdir(parents=True)  # every job failed: a row all the same, and its error
    (tmp_path / "k4" / "0_seed=0" / "summary.json").write_text(json.dumps({"status": "failed", "error": "no GPU"}))
    table = jobs_per_gpu_table.main(tmp_path).splitlines()
    assert table[2] == "| 1 | 4/4 | 40.0 | 360.0 | 10.0 | 31.50 | 500.0 | 0 | 0.5 | 0.2 |"
    assert table[3] == "| 2 | 4/5 | 20.0 | 720.0 | 11.0 | 31.50 | 1,000.0 | 6 | 0.5 | 0.2 |"  # overflows summed
    assert table[4] == "| 4 | 0/1 | – | – | – | – | – | – | – | – |"
    assert table[5] == "| 2 (MPS) | 4/4 | 15.0 | 960.0 | 11.0 | 31.50 | 1,000.0 | 0 | 0.5 | 0.2 |"  # MPS_KS's, last
    assert "k = 2: 1 job(s) not ok; the first: boom" in table and "k = 4: 1 job(s) not ok; the first: no GPU" in table
