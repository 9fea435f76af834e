"""Quality-vs-speed dashboard of a sweep: PNG plots, one HTML page, and the same to wandb.

    python -m gsexp.dashboard <sweep dir> [--out DIR] [--wandb] [--wandb-mode offline]
    python -m gsexp.dashboard --wandb-group sweep-<name> --wandb-project gsexp   # online only

Reads the sweep's results.csv (written at the end of every multirun; rebuilt from the job
folders when missing) and writes into --out (default <sweep dir>/dashboard/):
  quality_vs_speed.png  PSNR and LPIPS against render time, each variant labelled (points on
                        top of each other share a label; labels never overlap where there is
                        room), the Pareto front drawn; error bars: the test views' render-time
                        quartiles, and std over seeds where a variant ran more than once;
  quality_vs_train_time.png  the same against training time (train_seconds): the frontier of
                        the training recipes (schedule.resolution, strategy=budget);
  stages.png            stacked per-stage render latency and training-step phases per variant,
                        the legend under the bars;
  seeds.png             PSNR / SSIM / LPIPS per variant as dots on axes that span the data (all
                        three alike, each saying so), ± std where there are seeds;
  index.html            what was measured, the plots, results.md's tables, each run linked with
                        its renders, and every job's row (no external resources).
Every plot states the scene, iterations, device and backend (from each job's summary and
.hydra/config.yaml); --scene, --iterations, --device and --backend state what a sweep did not
record (older sweeps, a results.csv without its job folders).
"""
from __future__ import annotations

import argparse
import math
import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from gsexp.cli import Parser  # noqa: E402
from gsexp.sweep.labels import place_labels  # noqa: E402
from gsexp.sweep.page import write_html  # noqa: E402
from gsexp.sweep.results import (CONTEXT, backend_of, by_variant, collect, columns, fmt, mean_std,  # noqa: E402
                                 read_csv, scene_name, timing_columns, write_csv)

PLOTS = ("quality_vs_speed.png", "quality_vs_train_time.png", "stages.png", "seeds.png")
# x axes of the quality plots: key -> (name, axis label)
SPEED = {"render_ms": ("render time", "render time per view (ms, median over test views)"),
         "train_seconds": ("training time", "training time (s, evaluation excluded)")}


def short(label: str) -> str:
    """Plot label: drop group prefixes (rasterizer.blend=tcgs -> blend=tcgs)."""
    return re.sub(r"(^|\s)[\w.]*\.(\w+=)", r"\1\2", label)


def variant_means(rows: list[dict]) -> list[dict]:
    """One point per variant: metrics averaged over its seeds (std over seeds beside each), and
    the quartiles of its test views' render times (averaged over seeds) when recorded."""
    out = []
    for variant, group in by_variant(rows).items():
        point = {"variant": variant, "runs": len(group)}
        for key in ("psnr", "ssim", "lpips", "render_ms", "train_seconds"):
            point[key], point[key + "_std"] = mean_std(r.get(key) for r in group)
        for col in columns(group):
            if col.startswith(("stage_ms/", "phase_ms/")) or col in ("render_ms_p25", "render_ms_p75"):
                point[col] = mean_std(r.get(col) for r in group)[0]
        out.append(point)
    return out


def context_text(rows: list[dict], given: dict | None = None) -> str:
    """'scene lego (blender, downscale 2) · 7,000 iterations · device cuda · backend: CUDA kernels':
    what every plot states. `given` fills (or corrects) what the rows do not record."""
    given = {k: v for k, v in (given or {}).items() if v}
    ok = [r for r in rows if r.get("status") == "ok"] or rows

    def values(key):
        if key in given:
            return [str(given[key])]
        seen = []
        for r in ok:
            v = r.get(key)
            v = f"{int(v):,}" if key == "iterations" and isinstance(v, (int, float)) and _finite(v) else v
            if v not in (None, "") and str(v) not in seen:
                seen.append(str(v))
        return seen or ["not recorded"]

    backends = {"torch": "torch reference (gsexp/render/reference)", "cuda": "CUDA kernels (csrc/)"}
    backend = ", ".join(backends.get(b, b) for b in values("backend"))
    devices = values("device")
    text = (f"scene {' / '.join(values('scene'))} · {' / '.join(values('iterations'))} iterations · "
            f"device {' / '.join(devices)} · backend {backend}")
    if "cpu" in devices and "torch" in values("backend"):
        text += " (CPU timings of the reference, not of the kernels)"
    return text


def seeds_note(points: list[dict]) -> str:
    counts = sorted({p["runs"] for p in points})
    if counts == [1]:
        return "one run per variant: no spread over seeds"
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return f"mean ± std over {n} seeds"


def pareto_front(points: list[dict], quality: str, higher_is_better: bool, x: str = "render_ms") -> list[dict]:
    """Points no other point beats on both `x` (a time: lower is better) and `quality`, by `x`."""
    valid = [p for p in points if _finite(p.get(x)) and _finite(p.get(quality))]
    front, best = [], -math.inf
    for p in sorted(valid, key=lambda p: (p[x], -p[quality] if higher_is_better else p[quality])):
        q = p[quality] if higher_is_better else -p[quality]
        if q > best:
            front.append(p)
            best = q
    return front


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def time_error(p: dict, x: str = "render_ms") -> tuple[float, float] | None:
    """(below, above) the time `x`: for render time the test views' quartiles, else ± std over seeds."""
    lo, hi = p.get(f"{x}_p25"), p.get(f"{x}_p75")
    if _finite(lo) and _finite(hi):
        return max(p[x] - lo, 0.0), max(hi - p[x], 0.0)
    if p["runs"] > 1 and _finite(p.get(f"{x}_std")):
        return p[f"{x}_std"], p[f"{x}_std"]
    return None


def error_bars_note(points: list[dict], x: str = "render_ms") -> str:
    what = SPEED[x][0]
    if any(_finite(p.get(f"{x}_p25")) for p in points):
        xs = f"{what}: 25–75 % of the test views"
    elif any(p["runs"] > 1 for p in points):
        xs = f"{what}: ± std over seeds"
    else:
        xs = f"{what}: no spread recorded (one run" + (", no per-view times)" if x == "render_ms" else ")")
    y = "quality: ± std over seeds" if any(p["runs"] > 1 for p in points) else "quality: one run per variant"
    return f"error bars: {xs}; {y}"


def plot_quality_vs_speed(points: list[dict], path: Path, context: str = "", x: str = "render_ms") -> None:
    """PSNR (and LPIPS) against the time `x` (a key of SPEED), with the Pareto front."""
    metrics = [("psnr", "PSNR (dB)", True)] + (
        [("lpips", "LPIPS", False)] if any(_finite(p.get("lpips")) for p in points) else [])
    fig, axes = plt.subplots(1, len(metrics), figsize=(7 * len(metrics), 5.4), squeeze=False)
    placements = []
    for ax, (key, name, higher) in zip(axes[0], metrics):
        pts = [p for p in points if _finite(p.get(x)) and _finite(p.get(key))]
        for p in pts:
            err = time_error(p, x)
            ax.errorbar(p[x], p[key], xerr=None if err is None else [[err[0]], [err[1]]],
                        yerr=p[key + "_std"] if p["runs"] > 1 else None, fmt="o", color="tab:blue",
                        ecolor="0.6", elinewidth=1, capsize=2, markersize=5, zorder=3)
        front = pareto_front(pts, key, higher, x)
        ax.step([p[x] for p in front], [p[key] for p in front], where="post", color="tab:red",
                label="Pareto front", zorder=2)
        ax.set_xlabel(SPEED[x][1])
        ax.set_ylabel(name + (" (higher is better)" if higher else " (lower is better)"))
        ax.grid(alpha=0.3)
        ax.margins(0.12, 0.15)
        ax.legend(loc="lower right" if higher else "upper right", fontsize=8)
        placements.append((ax, [(p[x], p[key], short(p["variant"]), str(points.index(p) + 1)) for p in pts]))
    fig.suptitle(f"Quality vs {SPEED[x][0]} ({seeds_note(points)})\n{context}", fontsize=10)
    fig.text(0.5, 0.005, error_bars_note(points, x), ha="center", va="bottom", fontsize=8, color="0.3")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    keyed = set()
    for ax, pts in placements:  # after the layout: placement works in screen pixels
        keyed.update(place_labels(ax, pts))
    if keyed:  # labels that found no room are numbers: their key under the plots
        key = "   ".join(f"{i}: {short(points[i - 1]['variant'])}" for i in sorted(map(int, keyed)))
        fig.text(0.01, -0.01, textwrap.fill(key, 200), ha="left", va="top", fontsize=7)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_stages(points: list[dict], path: Path, context: str = "") -> None:
    """Stacked bars per variant: render stages per view, and a training step's phases. The
    legend sits under the axes, where it cannot cover a bar."""
    panels = [(prefix, label) for prefix, label in (("stage_ms/", "render time per view (ms, median per stage)"),
                                                    ("phase_ms/", "training step (ms, median per phase)"))
              if any(c.startswith(prefix) for c in columns(points))] or [("stage_ms/", "render time (ms)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(8 * len(panels), 0.45 * max(len(points), 2) + 2.4),
                             squeeze=False)
    for ax, (prefix, label) in zip(axes[0], panels):
        parts = [c for c in columns(points) if c.startswith(prefix)]
        left = [0.0] * len(points)
        for part in parts:
            widths = [p.get(part) if _finite(p.get(part)) else 0.0 for p in points]
            ax.barh(range(len(points)), widths, left=left, label=part.split("/", 1)[1])
            left = [a + b for a, b in zip(left, widths)]
        ax.set_yticks(range(len(points)), [short(p["variant"]) for p in points], fontsize=7)
        ax.set_xlabel(label)
        if parts:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14 - 0.3 / max(len(points), 2)),
                      ncol=min(len(parts), 6), frameon=False)
        ax.set_title("Per-stage render latency" if prefix == "stage_ms/" else "Per-phase training step")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"Latency per variant: medians over the test views ({seeds_note(points)})\n{context}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_seeds(points: list[dict], path: Path, context: str = "") -> None:
    """Quality per variant as dots (bars from 0 would hide the differences, bars from elsewhere
    exaggerate them): every axis spans the data, says so, and PSNR, SSIM and LPIPS are alike."""
    metrics = [("psnr", "PSNR (dB)"), ("ssim", "SSIM")] + (
        [("lpips", "LPIPS")] if any(_finite(p.get("lpips")) for p in points) else [])
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.8 * len(metrics), 0.45 * max(len(points), 2) + 2.2),
                             squeeze=False)
    for ax, (key, name) in zip(axes[0], metrics):
        xerr = [p[key + "_std"] if p["runs"] > 1 else float("nan") for p in points]
        ax.errorbar([p[key] for p in points], range(len(points)), xerr=xerr, fmt="o", color="tab:green",
                    ecolor="0.4", capsize=3, markersize=5)
        for i, p in enumerate(points):
            if _finite(p[key]):
                ax.annotate(fmt(p[key]), (p[key], i), xytext=(0, 5), textcoords="offset points", fontsize=6,
                            ha="center", color="0.3")
        ax.set_yticks(range(len(points)), [f"{short(p['variant'])} (n={p['runs']})" for p in points], fontsize=7)
        ax.set_xlabel(f"{name}: axis spans the data, not from 0")
        ax.xaxis.set_major_locator(MaxNLocator(4))  # long tick labels (0.01975) must not collide
        ax.margins(x=0.15, y=0.08)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"Quality per variant ({seeds_note(points)})\n{context}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def to_wandb(rows: list[dict], points: list[dict], out: Path, group: str, project: str, mode: str) -> None:
    """The table and charts as a run of the sweep's group (wandb offline unless mode=online)."""
    import wandb

    cols = columns(rows)
    table = wandb.Table(columns=cols, data=[[r.get(c) for c in cols] for r in rows])
    variants = wandb.Table(columns=["variant", "psnr", "lpips", "render_ms"],
                           data=[[short(p["variant"]), p["psnr"], p["lpips"], p["render_ms"]] for p in points])
    run = wandb.init(project=project, group=group, job_type="dashboard", name=f"dashboard-{group}",
                     dir=str(out), mode=mode, reinit=True)
    run.log({"results": table,
             "quality_vs_speed": wandb.plot.scatter(variants, "render_ms", "psnr", title="PSNR vs render ms"),
             "psnr_by_variant": wandb.plot.bar(variants, "variant", "psnr", title="PSNR per variant"),
             **{name.removesuffix(".png"): wandb.Image(str(out / name)) for name in PLOTS}})
    run.finish()


def rows_from_wandb(project: str, group: str) -> list[dict]:
    """Rows from the finished runs of a wandb group (needs wandb online and an API key)."""
    import wandb

    rows = []
    for i, run in enumerate(wandb.Api().runs(project, filters={"group": group})):
        if run.job_type == "dashboard":
            continue
        s = dict(run.summary)
        row = {"job": i, "dir": run.name, "overrides": " ".join(s.get("overrides") or []), "variant": run.name,
               "seed": str(run.config.get("seed", "")), "status": s.get("status", run.state), "error": s.get("error", "")}
        for key in ("psnr", "ssim", "lpips", "size_mb", "num_gaussians", "render_ms", "train_seconds"):
            row[key] = s.get(key)
        row.update(timing_columns(s))
        row.update(scene=scene_name(run.config.get("data") or {}), iterations=s.get("iterations"),
                   device=s.get("device") or run.config.get("device"),
                   backend=backend_of((run.config.get("rasterizer") or {}).get("_target_")))
        rows.append(row)
    return rows


def build(rows: list[dict], out: Path, title: str, given: dict | None = None,
          sweep_dir: Path | None = None) -> list[dict]:
    """The plots and index.html into `out`; given: context the rows lack (context_text)."""
    out.mkdir(parents=True, exist_ok=True)
    points = variant_means(rows)
    context = context_text(rows, given)
    plot_quality_vs_speed(points, out / PLOTS[0], context)
    plot_quality_vs_speed(points, out / PLOTS[1], context, x="train_seconds")
    plot_stages(points, out / PLOTS[2], context)
    plot_seeds(points, out / PLOTS[3], context)
    write_html(rows, out, title, PLOTS, context, sweep_dir)
    return points


def main(argv=None) -> Path:
    p = Parser(prog="python -m gsexp.dashboard", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep_dir", nargs="?", type=Path, help="a multirun directory (outputs/multirun/<time>)")
    p.add_argument("--out", type=Path, help="output folder (default <sweep dir>/dashboard)")
    p.add_argument("--wandb", action="store_true", help="also log the table and charts to wandb")
    p.add_argument("--wandb-mode", default="offline", choices=("offline", "online"))
    p.add_argument("--wandb-project", default="gsexp")
    p.add_argument("--wandb-group", help="read the runs of this wandb group instead of a sweep dir (online)")
    for key in CONTEXT:
        p.add_argument(f"--{key}", help=f"state the {key} where the jobs did not record it (e.g. older sweeps)")
    args = p.parse_args(argv)
    if args.wandb_group and not args.sweep_dir:
        rows, group = rows_from_wandb(args.wandb_project, args.wandb_group), args.wandb_group
        out = args.out or Path("dashboards") / args.wandb_group
    else:
        if args.sweep_dir is None:
            p.error("give a sweep directory (or --wandb-group)")
        if not args.sweep_dir.is_dir():
            p.error(f"sweep directory not found: {args.sweep_dir}")
        if (args.sweep_dir / "summary.json").is_file() or (args.sweep_dir / ".hydra").is_dir():
            p.error(f"{args.sweep_dir} is one run, not a sweep: give a multirun folder (outputs/multirun/<time>); "
                    "a run's results are in its summary.json")
        csv_path = args.sweep_dir / "results.csv"
        if csv_path.exists():
            rows = read_csv(csv_path)
        else:  # a sweep killed before its end callback: rebuild the table from the job folders
            rows = collect(args.sweep_dir)
            if rows:  # nothing is written into a folder that holds no jobs
                write_csv(rows, csv_path)
        group, out = f"sweep-{args.sweep_dir.name}", args.out or args.sweep_dir / "dashboard"
    if not rows:
        p.error("no jobs found")
    points = build(rows, out, title=f"gsexp {group}", given={k: getattr(args, k) for k in CONTEXT},
                   sweep_dir=args.sweep_dir)
    if args.wandb:
        to_wandb(rows, points, out, group, args.wandb_project, args.wandb_mode)
    print(f"[gsexp] dashboard: {out / 'index.html'}")
    return out / "index.html"


if __name__ == "__main__":
    main()
