"""Test PSNR against the step for each run of the real-capture study (the periodic evaluations in
each run's metrics.jsonl), one panel per capture: where a run peaks, and what a reset or a
densification step does to the test views.

    python experiments/real_captures/curves.py <study folder>... [--only FEAT ...] [--out PNG]

A study folder holds run folders named as run.sh names them (<data>_<raster>[_<feature>][_s<seed>]).
Steps, not seconds, on the x axis: the sessions' machines differ (2026-12-07's host was ~2x slower).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from features_table import NAME, curve  # noqa: E402  (run.sh's names, a run's evaluations)


def curves(folders, only=None) -> dict:
    """{capture: {feature[_s<seed>]: [(step, psnr), ...]}} for every run with evaluations."""
    found: dict = {}
    for folder in folders:
        for run in sorted(p for p in Path(folder).iterdir() if p.is_dir()):
            m, points = NAME.match(run.name), curve(run)
            feat = m["feat"] or "base"
            if not points or (only and feat not in only):
                continue
            label = feat if m["seed"] in (None, "0") else f"{feat}_s{m['seed']}"
            found.setdefault(m["base"].split("_")[0], {})[label] = points
    return found


def plot(found: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(found), figsize=(6.5 * len(found), 4.5), squeeze=False)
    for ax, (capture, runs) in zip(axes[0], sorted(found.items())):
        for label, points in sorted(runs.items()):
            steps, psnr = zip(*points)
            ax.plot([s / 1000 for s in steps], psnr, marker=".", label=label)
        ax.set(title=capture, xlabel="step (thousands)", ylabel="test PSNR (dB)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--only", nargs="*", help="features to draw (base for the plain run); default: all")
    ap.add_argument("--out", type=Path, default=Path("test_psnr_by_step.png"))
    args = ap.parse_args(argv)
    found = curves(args.folders, args.only)
    if not found:
        sys.exit(f"curves.py: no run with periodic test evaluations (metrics.jsonl) under {args.folders}")
    for capture, runs in sorted(found.items()):
        for label, points in sorted(runs.items()):
            peak = max(points, key=lambda p: p[1])
            print(f"{capture} {label}: peak {peak[1]:.2f} dB @ {peak[0] // 1000}K, end {points[-1][1]:.2f} "
                  f"@ {points[-1][0] // 1000}K")
    plot(found, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
