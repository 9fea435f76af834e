"""Quality-vs-speed dashboard of a sweep: PNG plots, one HTML page, and the same to wandb.

    python -m gsexp.dashboard <sweep dir> [--out DIR] [--wandb] [--wandb-mode offline]
    python -m gsexp.dashboard --wandb-group sweep-<name> --wandb-project gsexp   # online only

Reads the sweep's results.csv (written at the end of every multirun; rebuilt from the job
folders when missing) and writes into --out (default <sweep dir>/dashboard/):
  quality_vs_speed.png  PSNR and LPIPS against render time, each variant labelled, the
                        Pareto front drawn (better quality for less time);
  stages.png            stacked per-stage render latency and training-step phases per variant;
  seeds.png             PSNR / SSIM / LPIPS per variant, mean with std error bars over seeds;
  index.html            the table and the three plots (no external resources).
"""
from __future__ import annotations

import argparse
import html
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402

from gsexp.sweep.results import (by_variant, collect, columns, fmt, mean_std, read_csv, timing_columns,  # noqa: E402
                                 write_csv)

PLOTS = ("quality_vs_speed.png", "stages.png", "seeds.png")


def short(label: str) -> str:
    """Plot label: drop group prefixes (rasterizer.blend=tcgs -> blend=tcgs)."""
    return re.sub(r"(^|\s)[\w.]*\.(\w+=)", r"\1\2", label)


def variant_means(rows: list[dict]) -> list[dict]:
    """One point per variant: metrics averaged over its seeds."""
    out = []
    for variant, group in by_variant(rows).items():
        point = {"variant": variant, "runs": len(group)}
        for key in ("psnr", "ssim", "lpips", "render_ms"):
            point[key], point[key + "_std"] = mean_std(r.get(key) for r in group)
        for col in columns(group):
            if col.startswith(("stage_ms/", "phase_ms/")):
                point[col] = mean_std(r.get(col) for r in group)[0]
        out.append(point)
    return out


def pareto_front(points: list[dict], quality: str, higher_is_better: bool) -> list[dict]:
    """Points no other point beats on both render time and `quality`, by render time."""
    valid = [p for p in points if _finite(p.get("render_ms")) and _finite(p.get(quality))]
    front, best = [], -math.inf
    for p in sorted(valid, key=lambda p: (p["render_ms"], -p[quality] if higher_is_better else p[quality])):
        q = p[quality] if higher_is_better else -p[quality]
        if q > best:
            front.append(p)
            best = q
    return front


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def plot_quality_vs_speed(points: list[dict], path: Path) -> None:
    metrics = [("psnr", "PSNR (dB)", True)] + (
        [("lpips", "LPIPS", False)] if any(_finite(p.get("lpips")) for p in points) else [])
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.8), squeeze=False)
    for ax, (key, name, higher) in zip(axes[0], metrics):
        pts = [p for p in points if _finite(p.get("render_ms")) and _finite(p.get(key))]
        ax.scatter([p["render_ms"] for p in pts], [p[key] for p in pts], color="tab:blue", zorder=3)
        for p in pts:
            ax.annotate(short(p["variant"]), (p["render_ms"], p[key]), fontsize=7, xytext=(4, 3),
                        textcoords="offset points")
        front = pareto_front(pts, key, higher)
        ax.step([p["render_ms"] for p in front], [p[key] for p in front], where="post", color="tab:red",
                label="Pareto front", zorder=2)
        ax.set_xlabel("render time per view (ms, median)")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    fig.suptitle("Quality vs render time")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_stages(points: list[dict], path: Path) -> None:
    """Stacked bars per variant: render stages per view, and a training step's phases."""
    panels = [(prefix, label) for prefix, label in (("stage_ms/", "render time per view (ms, median per stage)"),
                                                    ("phase_ms/", "training step (ms, median per phase)"))
              if any(c.startswith(prefix) for c in columns(points))] or [("stage_ms/", "render time (ms)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(8 * len(panels), 0.45 * max(len(points), 2) + 1.5),
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
            ax.legend(fontsize=8, loc="best")
        ax.set_title("Per-stage render latency" if prefix == "stage_ms/" else "Per-phase training step")
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_seeds(points: list[dict], path: Path) -> None:
    metrics = [("psnr", "PSNR (dB)"), ("ssim", "SSIM")] + (
        [("lpips", "LPIPS")] if any(_finite(p.get("lpips")) for p in points) else [])
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), 0.45 * max(len(points), 2) + 1.8),
                             squeeze=False)
    for ax, (key, name) in zip(axes[0], metrics):
        ax.barh(range(len(points)), [p[key] for p in points], xerr=[p[key + "_std"] for p in points],
                color="tab:green", alpha=0.8, capsize=3)
        ax.set_yticks(range(len(points)), [f"{short(p['variant'])} (n={p['runs']})" for p in points], fontsize=7)
        ax.set_xlabel(name)
        finite = [p[key] for p in points if _finite(p[key])]
        if finite and key != "lpips":  # zoom to the differences
            lo, hi = min(finite), max(finite)
            ax.set_xlim(lo - 0.1 * (hi - lo + 1e-3) - max(p[key + "_std"] for p in points), hi + 0.1 * (hi - lo + 1e-3)
                        + max(p[key + "_std"] for p in points))
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Quality per variant (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_html(rows: list[dict], out: Path, title: str) -> Path:
    cols = [c for c in columns(rows) if c not in ("dir",)]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr class='{}'>".format(html.escape(str(r.get("status")))) + "".join(
        f"<td>{html.escape(fmt(r.get(c)) if isinstance(r.get(c), float) else str(r.get(c) if r.get(c) is not None else '–'))}</td>"
        for c in cols) + "</tr>" for r in rows)
    images = "".join(f'<figure><img src="{name}" alt="{name}"><figcaption>{name}</figcaption></figure>'
                     for name in PLOTS)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px}} tr.failed,tr.missing{{background:#fdd}} tr.invalid{{background:#eee}}
img{{max-width:100%}} figure{{margin:1em 0}}</style></head>
<body><h1>{html.escape(title)}</h1>
<p>{len(rows)} jobs, {sum(r.get('status') == 'ok' for r in rows)} ok.</p>
{images}
<h2>All jobs</h2><table><tr>{head}</tr>{body}</table>
</body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path


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
        rows.append(row)
    return rows


def build(rows: list[dict], out: Path, title: str) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    points = variant_means(rows)
    plot_quality_vs_speed(points, out / PLOTS[0])
    plot_stages(points, out / PLOTS[1])
    plot_seeds(points, out / PLOTS[2])
    write_html(rows, out, title)
    return points


def main(argv=None) -> Path:
    p = argparse.ArgumentParser(prog="python -m gsexp.dashboard", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep_dir", nargs="?", type=Path, help="a multirun directory (outputs/multirun/<time>)")
    p.add_argument("--out", type=Path, help="output folder (default <sweep dir>/dashboard)")
    p.add_argument("--wandb", action="store_true", help="also log the table and charts to wandb")
    p.add_argument("--wandb-mode", default="offline", choices=("offline", "online"))
    p.add_argument("--wandb-project", default="gsexp")
    p.add_argument("--wandb-group", help="read the runs of this wandb group instead of a sweep dir (online)")
    args = p.parse_args(argv)
    if args.wandb_group and not args.sweep_dir:
        rows, group = rows_from_wandb(args.wandb_project, args.wandb_group), args.wandb_group
        out = args.out or Path("dashboards") / args.wandb_group
    else:
        if args.sweep_dir is None:
            p.error("give a sweep directory (or --wandb-group)")
        if not args.sweep_dir.is_dir():
            p.error(f"sweep directory not found: {args.sweep_dir}")
        csv_path = args.sweep_dir / "results.csv"
        if csv_path.exists():
            rows = read_csv(csv_path)
        else:  # a sweep killed before its end callback: rebuild the table from the job folders
            rows = collect(args.sweep_dir)
            write_csv(rows, csv_path)
        group, out = f"sweep-{args.sweep_dir.name}", args.out or args.sweep_dir / "dashboard"
    if not rows:
        p.error("no jobs found")
    points = build(rows, out, title=f"gsexp {group}")
    if args.wandb:
        to_wandb(rows, points, out, group, args.wandb_project, args.wandb_mode)
    print(f"[gsexp] dashboard: {out / 'index.html'}")
    return out / "index.html"


if __name__ == "__main__":
    main()
