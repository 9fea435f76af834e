"""Issue 20's profile: where the blend backward's time goes, exact against the GEMM form, from
Nsight Compute's counters (the timing itself is bench.py's).

On the GPU machine (ncu reads counters only on a Firecracker machine; see the device notes):

    ncu --clock-control none --profile-from-start off --kernel-name regex:blend_backward \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \\
        --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \\
        --csv --page raw python experiments/tensor_core_backward/ncu_profile.py run --order order.json \\
        --lego RUN > ncu.csv
    python experiments/tensor_core_backward/ncu_profile.py summary ncu.csv order.json

`run` takes bench.py's options, checked by bench.py's own parser (default --sizes 1920x1080;
--views, --rounds are unused: orbit view 0 only). It builds bench.py's cases, runs --warmup
unprofiled backwards per mode, then one backward per scene, size, rasterizer and mode between
torch.cuda.profiler.start/stop (cudaProfilerStart/Stop), and writes what each was, in launch order. `summary` pairs ncu's kernel rows with that
order and prints a table: time, issue-slot use, occupancy, instructions, and the top stalls."""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# label -> ncu raw metric (first found wins); units as ncu reports them
COLUMNS = {
    "ms": ["gpu__time_duration.sum"],
    "issue busy %": ["sm__inst_issued.avg.pct_of_peak_sustained_active", "smsp__issue_active.avg.pct_of_peak_sustained_active",
                     "sm__issue_active.avg.pct_of_peak_sustained_elapsed"],
    "tensor pipe %": ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"],
    "SM busy %": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "occupancy %": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "warp instr (M)": ["smsp__inst_executed.sum", "sm__inst_executed.sum"],
    "regs": ["launch__registers_per_thread"],
    "L1 %": ["l1tex__throughput.avg.pct_of_peak_sustained_active"],
    "L2 %": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
    "DRAM %": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
}
STALL = "issue_stalled_"  # smsp__average_warp(s|_latency)_issue_stalled_<reason>[_per_issue_active].ratio


def run(a, order_path: str):
    import torch

    from gsexp.bench.cameras import orbit_cameras, parse_up
    from gsexp.bench.models import load_gaussians
    bench = __import__("bench")

    bench.require_cuda("ncu_profile.py")
    found = bench.scenes(a)
    if not found:
        sys.exit("ncu_profile.py: no scene to profile (give --lego, and --biker or the shared biker)")
    cases = []  # (what it is, case)
    for name, path in found:
        g = load_gaussians(path).to("cuda")
        for w, h in a.sizes:
            cams, _ = orbit_cameras(g.means, 1, w, h, up=parse_up(bench.SCENE_UP[name]), fov_deg=50.0)
            for spec in a.specs:
                case = bench.Case(g, [cams[0].to("cuda")], spec, a.modes)
                for mode in a.modes:
                    for _ in range(a.warmup):
                        case.backward(mode, 0)
                what = {"scene": name, "gaussians": len(g), "size": f"{w}x{h}", "rasterizer": spec.text,
                        "pairs": case.pairs}
                cases.append((what, case))
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    launches = []
    for what, case in cases:
        for mode in a.modes:
            case.backward(mode, 0)
            launches.append({**what, "mode": mode})
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    Path(order_path).write_text(json.dumps({"launches": launches}, indent=1))
    print(f"ncu_profile: {len(launches)} profiled backwards, order in {order_path}", file=sys.stderr)


def rows_of(path: Path) -> list:
    """ncu's raw CSV: a header row, a units row, then one row per profiled kernel."""
    lines = [r for r in csv.reader(path.read_text().splitlines()) if r]
    start = next((i for i, r in enumerate(lines) if "Kernel Name" in r), None)
    if start is None:
        sys.exit(f"ncu_profile: {path} has no ncu CSV header (did ncu run? see its stderr)")
    head, units = lines[start], lines[start + 1]
    return [dict(zip(head, r)) | {"_units": dict(zip(head, units))} for r in lines[start + 2:] if len(r) == len(head)]


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "n/a") else float("nan")


def summary(a):
    for path in (a.csv, a.order):
        if not Path(path).is_file():
            sys.exit(f"ncu_profile.py: {path} not found (relative paths are from {Path.cwd()}); give ncu's CSV "
                     f"and the --order file that `run` wrote")
    rows = rows_of(Path(a.csv))
    launches = json.loads(Path(a.order).read_text())["launches"]
    if len(rows) != len(launches):
        sys.exit(f"ncu_profile: {len(rows)} kernel rows in {a.csv} but {len(launches)} backwards in {a.order}: "
                 f"kernels seen: {sorted({r['Kernel Name'][:60] for r in rows})}")
    print("orbit view 0, one backward each (ncu --clock-control none)\n")
    head = ["scene", "size", "rasterizer", "mode"] + list(COLUMNS) + ["top stalls (warps per issued instr)"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for launch, r in zip(launches, rows):
        cells = [launch["scene"], launch["size"], launch["rasterizer"], launch["mode"]]
        for label, names in COLUMNS.items():
            name = next((n for n in names if n in r), None)
            v = number(r[name]) if name else float("nan")
            if label == "ms":  # ncu reports the duration in ns, us or ms: its units row says which
                v /= {"ns": 1e6, "us": 1e3, "usecond": 1e3, "nsecond": 1e6, "ms": 1.0, "msecond": 1.0}.get(
                    r["_units"].get(name, "ns"), 1e6)
            if label == "warp instr (M)":
                v /= 1e6
            cells.append("n/a" if v != v else f"{v:.3f}" if label == "ms" else f"{v:.1f}")
        stalls = {k.split(STALL)[1].split("_per_")[0].split(".")[0]: number(v) for k, v in r.items()
                  if STALL in k and k.endswith("ratio") and "not_issued" not in k}
        top = sorted(((v, k) for k, v in stalls.items() if v == v), reverse=True)[:5]
        cells.append(", ".join(f"{k} {v:.2f}" for v, k in top) or "n/a")
        print("| " + " | ".join(cells) + " |")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python experiments/tensor_core_backward/ncu_profile.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the profiled program (under ncu); other options are bench.py's")
    r.add_argument("--order", default="ncu_order.json", help="where to write the launch order")
    s = sub.add_parser("summary", help="the table from ncu's CSV and the launch order")
    s.add_argument("csv")
    s.add_argument("order")
    a, rest = p.parse_known_args(argv)
    if a.cmd == "summary":
        if rest:
            p.error(f"summary: unrecognized arguments: {' '.join(rest)}")
        summary(a)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    bench = __import__("bench")
    run(bench.parse_args(["--sizes", "1920x1080", *rest]), a.order)


if __name__ == "__main__":
    main()
