"""The scaling study's scripts (experiments/scale) end to end on the CPU, at toy sizes: grow,
bench, the training step, the summary. The GPU figures come from run.sh on the H200."""
import json
import subprocess
import sys

from conftest import REPO

SCALE = REPO / "experiments/scale"


def run(*args, timeout=600):
    proc = subprocess.run([sys.executable, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_study_pipeline_on_the_cpu(shared, tmp_path):
    base = shared / "data/scenes/inria_format_9k.ply"
    for size in ("6K", "12K"):
        run("-m", "gsexp.bench.grow", base, tmp_path / f"models/m_{size}.ply", "--gaussians", size)
        run("-m", "gsexp.bench", "--ply", tmp_path / f"models/m_{size}.ply", "--width", "64", "--height", "48",
            "--num-cameras", "1", "--warmup", "0", "--frames", "1", "--rasterizers", "torch",
            "--json", tmp_path / f"render/m_{size}.json")
    run(SCALE / "train_step.py", "--ply", tmp_path / "models/m_6K.ply", "--trainer", "gsexp", "--steps", "2",
        "--warmup", "1", "--set", "rasterizer=torch", "--set", "device=cpu", "--set", "data.downscale=16",
        "--set", "eval_lpips=false", "--profile", "2", "--top", "5", "--out", tmp_path / "train/gsexp_6K_r1.json")
    step = json.loads((tmp_path / "train/gsexp_6K_r1.json").read_text())
    assert step["num_gaussians"] == 6_000 and step["step_ms_median"] > 0 and step["pair_overflows"] == 0
    prof = step["profile"]  # on a CPU: the ops with the most self time, and the step's phases
    assert prof["steps"] == 2 and len(prof["top"]) == 5 and prof["total_ms_per_step"] > prof["top"][0]["ms_per_step"] > 0
    assert set(step["phase_ms"]) >= {"render", "backward", "optimizer"} and step["phase_ms"]["backward"] > 0
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile/gsexp_6K.json").write_text(json.dumps(step))

    out = run(SCALE / "summarize.py", tmp_path, "--out", tmp_path / "summary").stdout
    assert "| 6,000 |" in out and "| 12,000 |" in out and "Training step" in out and "pair overflows" in out
    assert "Where a training step goes at 6,000 Gaussians" in out and f"| 1 | {prof['top'][0]['name'][:20]}" in out
    assert (tmp_path / "summary/cost_per_pair.png").stat().st_size > 0
    assert (tmp_path / "summary/results.md").read_text().strip() == out.strip()


def test_train_step_refuses_a_missing_model(tmp_path):
    proc = subprocess.run([sys.executable, SCALE / "train_step.py", "--ply", tmp_path / "none.ply", "--trainer",
                           "gsexp"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "none.ply: no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_kernel_names_in_the_profile_table():
    """CUDA kernels' names as the profiler gives them, cut to the name (a `?` hid ours before)."""
    sys.path.insert(0, str(SCALE))
    try:
        from summarize import short
    finally:
        sys.path.remove(str(SCALE))
    assert short("void (anonymous namespace)::preprocess_kernel<3>(int, float const*)") == "preprocess_kernel"
    assert short("void gsplat::rasterize_to_pixels_3dgs_bwd_kernel<float>(unsigned int)") == \
        "gsplat::rasterize_to_pixels_3dgs_bwd_kernel"
    assert short("Optimizer.step#Adam.step") == "Optimizer.step#Adam.step"
