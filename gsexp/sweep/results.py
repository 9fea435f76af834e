"""A sweep's jobs as rows: read each job's summary.json, write results.csv and results.md."""
from __future__ import annotations

import csv
import json
import math
import re
import statistics
from pathlib import Path

import yaml

from gsexp.render.constants import STAGES
from gsexp.train.phases import PHASES

METRICS = ("psnr", "cc_psnr", "ssim", "lpips", "size_mb", "num_gaussians", "render_ms", "train_seconds")
SEED = re.compile(r"^seed=")
GPU_RECORD = ("gpu", "gpu_uuid", "started", "ended")  # written by pool jobs (train.py), with gpu_seen
SLURM_RECORD = ("slurm_job_id", "slurm_log")  # written by SLURM jobs (gsexp/sweep/slurm.py)
CONTEXT = ("scene", "iterations", "device", "backend")  # what every plot of the sweep must state


def timing_columns(summary: dict) -> dict:
    """stage_ms/<stage> (render, per view) and phase_ms/<phase> (a training step), in order."""
    row = {}
    for key, order in (("stage_ms", STAGES), ("phase_ms", PHASES)):
        values = summary.get(key) or {}
        for name in sorted(values, key=lambda s: (order.index(s) if s in order else len(order), s)):
            row[f"{key}/{name}"] = values[name]
    return row


def job_dirs(sweep_dir: Path) -> list[Path]:
    """Job folders (<number>_<name>, or anything holding .hydra/), by job number."""
    found = [p for p in Path(sweep_dir).iterdir() if p.is_dir() and ((p / ".hydra").is_dir() or (p / "summary.json").exists())]

    def number(p: Path):
        head = p.name.split("_", 1)[0]
        return (0, int(head)) if head.isdigit() else (1, p.name)

    return sorted(found, key=number)


def collect(sweep_dir) -> list[dict]:
    """One row per job. A job that never wrote a summary (killed) is status 'missing'."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"sweep directory not found: {sweep_dir}")
    rows = []
    for i, job in enumerate(job_dirs(sweep_dir)):
        path = job / "summary.json"
        summary = json.loads(path.read_text()) if path.exists() else {"status": "missing"}
        overrides = summary.get("overrides")
        if overrides is None and (job / ".hydra" / "overrides.yaml").exists():
            overrides = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()) or []
        overrides = [o.removeprefix("++") for o in overrides or []]  # "++rasterizer.x=v" is "rasterizer.x=v"
        head = job.name.split("_", 1)[0]
        row = {"job": int(head) if head.isdigit() else i, "dir": job.name,
               "overrides": " ".join(overrides),
               "variant": "",
               "seed": next((o.split("=", 1)[1] for o in overrides if SEED.match(o)), ""),
               "status": summary.get("status", "missing"), "error": summary.get("error", "")}
        for key in METRICS:
            row[key] = summary.get(key)
        if summary.get("gpu") is not None:  # a pool job: its GPU as nvidia-smi saw it, and when it ran
            row.update({k: summary.get(k) for k in GPU_RECORD})
            row["gpu_seen"] = " ".join(summary.get("gpu_seen") or []) if "gpu_seen" in summary else None
        if summary.get("slurm_job_id") is not None:  # a SLURM job: its id, and its stdout (sweep-relative)
            row.update({k: relative_to(summary.get(k), sweep_dir) for k in SLURM_RECORD})
        row.update(timing_columns(summary))
        row.update(view_spread(summary))
        row.update(job_context(job, summary))
        row["_overrides"] = overrides
        rows.append(row)
    # A variant is what sets a job apart: drop overrides every job shares, and the seed.
    shared = set.intersection(*(set(r["_overrides"]) for r in rows)) if len(rows) > 1 else set()
    for row in rows:
        own = [o for o in row.pop("_overrides") if o not in shared and not SEED.match(o)]
        row["variant"] = " ".join(own) or "default"
    return rows


def relative_to(value, folder: Path):
    """A path inside `folder` relative to it; anything else as it was."""
    if isinstance(value, str) and Path(value).is_absolute() and Path(value).is_relative_to(folder.resolve()):
        return str(Path(value).relative_to(folder.resolve()))
    return value


def view_spread(summary: dict) -> dict:
    """render_ms_p25 / _p75: the quartiles of the test views' render times (the render-time
    error bars), when the summary has per-view times."""
    times = sorted(v["render_ms"] for v in summary.get("per_view") or [] if v.get("render_ms") is not None)
    if len(times) < 2:
        return {}
    q = statistics.quantiles(times, n=4, method="inclusive")
    return {"render_ms_p25": q[0], "render_ms_p75": q[2]}


def scene_name(data: dict) -> str | None:
    """'lego (blender, downscale 2)' from a job's data config."""
    if not data.get("kind"):
        return None
    name = Path(str(data["path"])).name if data.get("path") else data["kind"]
    scale = f", downscale {data['downscale']}" if (data.get("downscale") or 1) > 1 else ""
    return name if name == data["kind"] else f"{name} ({data['kind']}{scale})"


def backend_of(target) -> str | None:
    """torch | cuda: the backend of a rasterizer settings class named by its `_target_`."""
    from gsexp.render.settings import VARIANTS

    cls = next((c for c in VARIANTS.values() if f"{c.__module__}.{c.__qualname__}" == target), None)
    return cls.backend if cls else None


def job_context(job: Path, summary: dict) -> dict:
    """scene, iterations, device and backend of a job, from its summary and .hydra/config.yaml.
    device: the summary's, else cuda for a pool job on a GPU or a CUDA rasterizer, else the
    config's device= (auto when it did not say)."""
    path = job / ".hydra" / "config.yaml"
    cfg = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    backend = backend_of((cfg.get("rasterizer") or {}).get("_target_"))
    device = summary.get("device") or ("cuda" if summary.get("gpu") is not None or backend == "cuda"
                                       else cfg.get("device"))
    return {"scene": scene_name(cfg.get("data") or {}), "iterations": summary.get("iterations") or cfg.get("iterations"),
            "device": device, "backend": backend}


def columns(rows: list[dict]) -> list[str]:
    cols = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    return cols


def write_csv(rows: list[dict], path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns(rows) or ["job"])
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path) -> list[dict]:
    """Rows back from results.csv, numbers as floats (empty cells as None)."""
    def value(v: str):
        if v == "":
            return None
        try:
            return float(v)
        except ValueError:
            return v

    with open(path, newline="") as f:
        return [{k: (v if k in ("overrides", "variant", "seed", "status", "error", "dir", "slurm_job_id")
                 else value(v))
                 for k, v in row.items()} for row in csv.DictReader(f)]


def fmt(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def by_variant(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if row["status"] == "ok":
            groups.setdefault(row["variant"], []).append(row)
    return groups


def mean_std(values) -> tuple[float, float]:
    values = [float(v) for v in values if v is not None]
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def tables(rows: list[dict]) -> list[tuple[str, list[str], list[list]]]:
    """results.md's tables as (title, header, cells): finished jobs, variants over seeds (mean ±
    std, when a variant ran more than once), jobs that did not finish. The HTML page shows the same."""
    stage_cols = [c for c in columns(rows) if c.startswith(("stage_ms/", "phase_ms/"))]
    head = ["job", "variant", "seed", "PSNR", "SSIM", "LPIPS", "size MB", "#G", "render ms",
            *[c.split("/", 1)[1] + (" ms" if c.startswith("stage") else " ms/step") for c in stage_cols], "train s"]
    done = [[r["job"], r["variant"], r["seed"] or "–", fmt(r["psnr"]), fmt(r["ssim"]), fmt(r["lpips"]),
             fmt(r["size_mb"], 3), fmt(r["num_gaussians"]), fmt(r["render_ms"], 3),
             *[fmt(r.get(c), 3) for c in stage_cols], fmt(r["train_seconds"], 3)] for r in rows if r["status"] == "ok"]
    out = [("", head, done)]
    groups = by_variant(rows)
    if any(len(g) > 1 for g in groups.values()):
        cells = [[variant, len(g)] + ["{:.4g} ± {:.2g}".format(*mean_std(r[k] for r in g))
                                      for k in ("psnr", "ssim", "lpips", "render_ms")] for variant, g in groups.items()]
        out.append(("Over seeds (mean ± std)", ["variant", "runs", "PSNR", "SSIM", "LPIPS", "render ms"], cells))
    others = [[r["job"], r["overrides"], r["status"], (r["error"] or "").replace("\n", " ")]
              for r in rows if r["status"] != "ok"]
    if others:
        out.append(("Did not finish", ["job", "overrides", "status", "error"], others))
    return out


def write_markdown(rows: list[dict], path, title: str = "Sweep results") -> None:
    """Finished jobs as a table, then variants over seeds (mean ± std), the GPUs, what did not run."""
    lines = [f"# {title}", "", f"{len(rows)} jobs: " + ", ".join(
        f"{sum(r['status'] == s for r in rows)} {s}" for s in sorted({r['status'] for r in rows}))]
    check = gpu_sharing(rows)
    for name, head, cells in tables(rows):
        if name == "Did not finish" and check:  # the GPUs section sits before it, as it always has
            lines += ["", "## GPUs", "", check]
            check = ""
        lines += ["", f"## {name}", ""] if name else [""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in cells]
    if check:
        lines += ["", "## GPUs", "", check]
    lines += slurm_jobs(rows)
    Path(path).write_text("\n".join(lines) + "\n")


def gpu_sharing(rows: list[dict]) -> str:
    """The pool's promise checked from the jobs' own records (GPU_RECORD and gpu_seen): the
    most jobs that ran at once on one GPU, whether nvidia-smi saw each job's process on its
    claimed GPU only, and the sweep's wall time against the jobs' summed times."""
    jobs = [(r.get("gpu_uuid") or f"device {r['gpu']}", r["started"], r["ended"], r.get("gpu_seen"))
            for r in rows if r.get("gpu") is not None and r.get("started") is not None]
    if not jobs:
        return ""
    # the most running at one instant: the count peaks at some job's start (not the jobs that overlap
    # one job, which counts two that ran one after the other beside it)
    most = max(sum(1 for g, a, b, _ in jobs if g == gpu and a <= start < b) for gpu, start, _, _ in jobs)
    seen = [js for _, _, _, js in jobs if js is not None]
    own = sum(js == g for (g, _, _, js) in jobs if js is not None)
    smi = f"; nvidia-smi saw {own} of {len(seen)} jobs on their claimed GPU only" if seen else ""
    wall = max(b for _, _, b, _ in jobs) - min(a for _, a, _, _ in jobs)
    busy = sum(b - a for _, a, b, _ in jobs)
    pace = f" ({busy / wall:.2f} at a time on average)" if wall > 0 else ""
    shared = (" Jobs shared a GPU (hydra.launcher.jobs_per_gpu > 1), so their training and render times "
              "are slower than alone and not comparable with single-job runs: compare speed with jobs_per_gpu=1."
              if most > 1 else "")
    return (f"{len(jobs)} pool jobs on {len({g for g, *_ in jobs})} GPU(s); at most {most} ran at once on one "
            f"GPU{smi}. Wall time {wall:.0f} s from the first job's start to the last one's end; the jobs' "
            f"own times add up to {busy:.0f} s{pace}.{shared}")


def slurm_jobs(rows: list[dict]) -> list[str]:
    """results.md's SLURM section: each SLURM job's id, status and stdout file (submitit's), or nothing."""
    jobs = [r for r in rows if r.get("slurm_job_id") is not None]
    if not jobs:
        return []
    lines = ["", "## SLURM", "", f"{len(jobs)} of {len(rows)} jobs ran as SLURM jobs. Each one's stdout "
             "(stderr beside it, .err) is in submitit's folder, relative to this sweep:", "",
             "| job | SLURM job | status | stdout |", "|---|---|---|---|"]
    return lines + [f"| {r['job']} | {r['slurm_job_id']} | {r['status']} | {r.get('slurm_log') or '–'} |" for r in jobs]


def summarize(sweep_dir) -> list[dict]:
    """Write results.csv and results.md into the sweep directory; return the rows."""
    sweep_dir = Path(sweep_dir)
    rows = collect(sweep_dir)
    write_csv(rows, sweep_dir / "results.csv")
    write_markdown(rows, sweep_dir / "results.md", title=f"Sweep {sweep_dir.name}")
    return rows
