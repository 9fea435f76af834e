"""experiments/real_captures/features_table.py (issue 41's study): runs grouped by data, raster and
feature from run.sh's names, means over the seeds, and the per-view PSNR range over the seeds."""
import gzip
import json
import sys

from test_train_run import REPO

sys.path.insert(0, str(REPO / "experiments" / "real_captures"))
import features_table  # noqa: E402


def write(folder, name, psnrs, status="ok", **extra):
    (folder / name).mkdir(parents=True)
    per_view = [{"view": f"{i:04d}", "psnr": p} for i, p in enumerate(psnrs)]
    summary = {"status": status, "psnr": sum(psnrs) / len(psnrs), "per_view": per_view, **extra}
    (folder / name / "summary.json").write_text(json.dumps(summary))


def test_features_and_seeds_group_and_the_spread_is_per_view(tmp_path):
    write(tmp_path, "beer_prepared_tcgs_accutile", [20.0, 30.0], num_gaussians=100)
    write(tmp_path, "beer_prepared_tcgs_accutile_s1", [22.0, 25.0], num_gaussians=300)
    write(tmp_path, "beer_prepared_tcgs_accutile_both", [21.0, 26.0], cc_psnr=24.0)
    write(tmp_path, "beer_prepared_tcgs_accutile_both_s1", [21.5, 26.0])
    write(tmp_path, "beer_prepared_tcgs_accutile_grid_s1", [1.0, 1.0], status="error")  # unfinished: left out
    rows = features_table.table([tmp_path]).splitlines()[2:]
    assert len(rows) == 2
    base, both = (r.split(" | ") for r in rows)
    assert base[1:4] == ["base", "2", "24.25"] and base[7] == "200"
    assert base[9] == "3.50, 5.00"   # view 0: 20 vs 22, view 1: 30 vs 25
    assert both[1:5] == ["both", "2", "23.62", "24.00"] and both[9] == "0.25, 0.50"
    assert base[10] == both[10] == "– |"  # no metrics.jsonl beside the summaries


def test_the_peak_of_the_periodic_test_psnr_and_its_step(tmp_path):
    """Where a run's metrics.jsonl lies beside its summary: its best periodic evaluation (beer's
    peaks at 1-3K steps and falls after), the mean peak over seeds and each seed's step."""
    for name, curve in (("beer_prepared_tcgs_accutile", [23.7, 23.6, 21.1]),
                        ("beer_prepared_tcgs_accutile_s1", [23.1, 23.9, 22.0])):
        write(tmp_path, name, [21.0, 22.0])
        rows = [{"step": 1000 * (i + 1), "eval/psnr": p} for i, p in enumerate(curve)]
        rows.insert(1, {"step": 1500, "train/loss": 0.1})  # not an evaluation
        text = "\n".join(json.dumps(r) for r in rows)
        if name.endswith("_s1"):  # a committed study's file, gzipped, reads the same
            with gzip.open(tmp_path / name / "metrics.jsonl.gz", "wt") as f:
                f.write(text)
        else:
            (tmp_path / name / "metrics.jsonl").write_text(text)
    (row,) = [r.split(" | ") for r in features_table.table([tmp_path]).splitlines()[2:]]
    assert row[10] == "23.80 @ 1K/2K |"


def test_turbo_at_half_the_steps_is_its_own_row(tmp_path):
    write(tmp_path, "beer_prepared_tcgs_accutile_turbo", [22.0, 24.0])
    write(tmp_path, "beer_prepared_tcgs_accutile_turbo15k", [21.0, 23.0])
    write(tmp_path, "beer_prepared_tcgs_accutile_turbo15k_s1", [21.0, 24.0])
    rows = [r.split(" | ") for r in features_table.table([tmp_path]).splitlines()[2:]]
    assert [(r[1], r[2], r[3]) for r in rows] == [("turbo15k", "2", "22.25"), ("turbo", "1", "23.00")]


def test_combined_recipes_are_their_own_rows(tmp_path):
    """turbo15k_app is the turbo recipe with appearance=affine, not turbo15k's app feature."""
    write(tmp_path, "beer_prepared_tcgs_accutile_turbo15k_app", [22.0, 24.0])
    write(tmp_path, "beer_prepared_tcgs_accutile_turbo15k_grid_s1", [21.0, 23.0])
    write(tmp_path, "beer_prepared_tcgs_accutile_turbo12k", [20.0, 22.0])
    rows = [r.split(" | ") for r in features_table.table([tmp_path]).splitlines()[2:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("| beer_prepared_tcgs_accutile", "turbo15k_app", "1"),
                                                  ("| beer_prepared_tcgs_accutile", "turbo15k_grid", "1"),
                                                  ("| beer_prepared_tcgs_accutile", "turbo12k", "1")]


def test_the_table_knows_every_feature_run_sh_trains(tmp_path):
    """A feature run.sh trains but the table does not name would fold into another row's name."""
    import re

    text = (REPO / "experiments" / "real_captures" / "run.sh").read_text()
    block = text[text.index("declare -A FEAT=("):text.index("declare -A FEAT_ITERS")]
    trained = set(re.findall(r"^\s*\[(\w+)\]=", block, re.M)) - {"base"}
    assert trained == set(features_table.FEATURES)
    write(tmp_path, "fern_prepared_tcgs_accutile_turbo12k_ns", [26.0, 28.0])
    rows = [r.split(" | ") for r in features_table.table([tmp_path]).splitlines()[2:]]
    assert [(r[0], r[1]) for r in rows] == [("| fern_prepared_tcgs_accutile", "turbo12k_ns")]


def test_feature_ops_counts_each_feature():
    """experiments/real_captures/feature_ops.py: a torch-op count per per-view feature, forward and
    backward, on the CPU."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(repo / "experiments/real_captures/feature_ops.py")], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    import re

    found = re.findall(r"(\w+) (\d+) ops, (\d+) us", out.strip().splitlines()[-1])
    counts = {name: int(ops) for name, ops, _ in found}
    assert set(counts) == {"pose_opt", "affine", "bilateral_grid"} and all(int(us) > 0 for *_, us in found)
    assert 0 < counts["pose_opt"] < 300, counts  # 397 with autograd's graph of the motion (aa89c1d), 232 written out


def test_curves_draw_each_runs_periodic_test_psnr_by_capture(tmp_path, capsys):
    """experiments/real_captures/curves.py: one panel per capture, a line per feature (seed s as
    _s<s>), the evaluations in step order; runs without evaluations are left out."""
    import curves

    def run(name, points):
        (tmp_path / name).mkdir()
        rows = [{"step": 0, "train/loss": 0.1}] + [{"step": s, "eval/psnr": p} for s, p in points]
        (tmp_path / name / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)))

    run("fern_prepared_tcgs_accutile", [(2000, 27.8), (1000, 28.7)])
    run("fern_prepared_tcgs_accutile_dens3k_s1", [(1000, 28.9)])
    run("beer_prepared_tcgs_accutile_short5k", [(1000, 22.6)])
    run("beer_prepared_tcgs_accutile_grid", [])
    found = curves.curves([tmp_path])
    assert found == {"fern": {"base": [(1000, 28.7), (2000, 27.8)], "dens3k_s1": [(1000, 28.9)]},
                     "beer": {"short5k": [(1000, 22.6)]}}
    assert curves.curves([tmp_path], only=["base"]) == {"fern": {"base": [(1000, 28.7), (2000, 27.8)]}}
    curves.main([str(tmp_path), "--out", str(tmp_path / "c.png")])
    assert "fern base: peak 28.70 dB @ 1K, end 27.80 @ 2K" in capsys.readouterr().out
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_run_sh_trains_each_feature_with_its_seeds(tmp_path):
    """run.sh train's run list (train.py replaced by a stand-in that logs its arguments): SEEDS for
    each plain feature, only seed s for an entry feat@s, run.sh's names, and a finished run skipped."""
    import os
    import stat
    import subprocess
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    (bin_dir / "python").write_text('#!/bin/bash\necho "$@" >> "$CALLS"\n')
    (bin_dir / "python").chmod(stat.S_IRWXU)
    done = tmp_path / "r" / "runs" / "beer_prepared_tcgs_accutile_app_s1"
    done.mkdir(parents=True)
    (done / "summary.json").write_text('{"status": "ok"}')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(log), "W": str(tmp_path / "w"),
           "R": str(tmp_path / "r"), "DATAS": "beer_prepared", "RASTERS": "tcgs_accutile",
           "FEATS": "base batch2 grid@1 app@0 app@1", "SEEDS": "0 2"}
    subprocess.run(["bash", str(REPO / "experiments/real_captures/run.sh"), "train"], env=env, check=True,
                   capture_output=True)
    calls = [dict(a.split("=", 1) for a in line.split()[1:] if "=" in a) for line in log.read_text().splitlines()]
    assert [(c["name"], c["seed"]) for c in calls] == [
        ("beer_prepared_tcgs_accutile", "0"), ("beer_prepared_tcgs_accutile_s2", "2"),
        ("beer_prepared_tcgs_accutile_batch2", "0"), ("beer_prepared_tcgs_accutile_batch2_s2", "2"),
        ("beer_prepared_tcgs_accutile_grid_s1", "1"), ("beer_prepared_tcgs_accutile_app", "0")]
    assert calls[2]["batch_size"] == "2" and calls[2]["iterations"] == "15000"
    assert calls[4]["appearance"] == "bilateral_grid"
    for bad in ("gridd@1", "grid@", "grid@one"):  # a typo fails before any run, naming the entry
        failed = subprocess.run(["bash", str(REPO / "experiments/real_captures/run.sh"), "train"],
                                env={**env, "FEATS": f"base {bad}"}, capture_output=True, text=True)
        assert failed.returncode == 2 and f"FEATS entry '{bad}'" in failed.stderr, failed.stderr
    assert len(log.read_text().splitlines()) == len(calls)  # base, listed first, did not run either
