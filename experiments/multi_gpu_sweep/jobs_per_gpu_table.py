"""The jobs_per_gpu table (issue 39) from jobs_per_gpu.sh's sweeps: one row per k.

    python experiments/multi_gpu_sweep/jobs_per_gpu_table.py <folder with k1/, k2/, ..., mps_k2/, ...>"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def row(sweep: Path) -> dict:
    # a sweep as it ran (<job>/summary.json) or as committed here (job<n>_summary.json)
    files = sorted(sweep.glob("*/summary.json")) or sorted(sweep.glob("job*_summary.json"))
    jobs = [json.loads(p.read_text()) for p in files]
    ok = [j for j in jobs if j.get("status") == "ok"]
    k = sweep.name.removeprefix("mps_").removeprefix("k") + (" (MPS)" if sweep.name.startswith("mps_") else "")
    failed = [j.get("error") or j.get("status", "?") for j in jobs if j.get("status") != "ok"]
    if not ok:  # a sweep whose every job failed still gets its row, and its first error below the table
        return {"k": k, "jobs": f"0/{len(jobs)}", "failed": failed}
    wall = max(j["ended"] for j in ok) - min(j["started"] for j in ok) if all("started" in j for j in ok) else None

    def med(key):
        return statistics.median(key(j) for j in ok)

    return {"k": k, "jobs": f"{len(ok)}/{len(jobs)}", "failed": failed, "wall_s": wall,
            "cells_per_hour": 3600 * len(ok) / wall if wall else None,
            "train_s": med(lambda j: j["train_seconds"]), "psnr": statistics.mean(j["psnr"] for j in ok),
            "peak_mib": max(j.get("peak_memory_mb") or 0 for j in ok),
            # renders that dropped pairs (a stale pair capacity: the 2026-12-06c sweeps, fixed since)
            "overflows": sum(j.get("pair_overflows") or 0 for j in ok),
            "to_first_step_s": med(lambda j: j["overhead_s"]["to_first_step"]),
            "after_last_step_s": med(lambda j: j["overhead_s"]["after_last_step"])}


def fmt(v, digits=1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}" if isinstance(v, float) else str(v)


def main(folder: Path) -> str:
    sweeps = sorted(folder.glob("k*")) + sorted(folder.glob("mps_k*"))  # MPS_KS's sweeps after the plain ones
    rows = [row(d) for d in sweeps if d.is_dir()]
    head = ["k", "jobs ok", "wall s", "cells / hour", "train s (median)", "PSNR (mean)", "peak MiB (max)",
            "pair overflows", "start-up s (median)", "end s (median)"]
    keys = ["k", "jobs", "wall_s", "cells_per_hour", "train_s", "psnr", "peak_mib", "overflows", "to_first_step_s", "after_last_step_s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(fmt(r.get(k), 2 if k == "psnr" else 1) for k in keys) + " |" for r in rows]
    lines += [f"\nk = {r['k']}: {len(r['failed'])} job(s) not ok; the first: {r['failed'][0]}"
              for r in rows if r["failed"]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
