"""experiments/tensor_core_backward/ncu_profile.py's summary: ncu's raw CSV (its messages, a
header, a units row, one row per kernel) paired with the launch order; a count that does not
match is an error, not a misaligned table."""
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "experiments/tensor_core_backward/ncu_profile.py"
HEAD = ["ID", "Kernel Name", "gpu__time_duration.sum", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__inst_executed.sum", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
        "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"]
UNITS = ["", "", "usecond", "%", "inst", "ratio", "ratio", "ratio"]


def quoted(cells):
    return ",".join(f'"{c}"' for c in cells)


def write(tmp_path, kernels):
    lines = ["==PROF== Connected to process 1 (python3)", "lego: 266,872 Gaussians", quoted(HEAD), quoted(UNITS)]
    lines += [quoted(k) for k in kernels] + ["==PROF== Disconnected from process 1"]
    (tmp_path / "ncu.csv").write_text("\n".join(lines) + "\n")
    order = {"launches": [{"scene": "lego", "size": "1920x1080", "rasterizer": "tc_gs:intersect=accutile", "mode": m,
                           "gaussians": 1, "pairs": 1} for m in ("exact", "gemm_tf32")]}
    (tmp_path / "order.json").write_text(json.dumps(order))
    return subprocess.run([sys.executable, str(SCRIPT), "summary", str(tmp_path / "ncu.csv"),
                           str(tmp_path / "order.json")], capture_output=True, text=True)


def test_summary_pairs_kernels_with_modes(tmp_path):
    out = write(tmp_path, [
        ["0", "blend_backward_kernel(BlendBackwardArgs)", "812.6", "61.2", "1,234,567", "3.10", "0.90", "0.20"],
        ["1", "void blend_backward_gemm_kernel<1>(BlendBackwardArgs)", "701.0", "48.0", "2,000,000", "1.50", "2.25", "0.05"]])
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| lego")]
    assert len(rows) == 2
    assert rows[0].startswith("| lego | 1920x1080 | tc_gs:intersect=accutile | exact | 0.813 |") and "1.2 |" in rows[0]  # us -> ms; 1.23 M instructions
    assert "long_scoreboard 3.10, wait 0.90, lg_throttle 0.20" in rows[0]  # stalls, largest first
    assert rows[1].startswith("| lego | 1920x1080 | tc_gs:intersect=accutile | gemm_tf32 | 0.701 |") and "wait 2.25, long_scoreboard 1.50" in rows[1]


def test_summary_refuses_a_count_mismatch(tmp_path):
    out = write(tmp_path, [["0", "blend_backward_kernel(BlendBackwardArgs)", "812.5", "61.2", "1", "1", "1", "1"]])
    assert out.returncode != 0 and "1 kernel rows" in out.stderr and "2 backwards" in out.stderr


def test_bad_input_gets_one_line(tmp_path):
    """A missing file and (on this CPU machine) a run without a GPU or with a bad size: one line, no traceback."""
    def call(*args):
        return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=tmp_path)
    out = call("summary", "missing.csv", "order.json")
    assert out.returncode != 0 and "missing.csv not found" in out.stderr and "Traceback" not in out.stderr
    out = call("run", "--lego", "x.ply", "--sizes", "1920by1080")
    assert out.returncode == 2 and "--sizes: expected WxH" in out.stderr and "Traceback" not in out.stderr
