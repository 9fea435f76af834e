"""The recipe study's frontier: 200-view PSNR and LPIPS (VGG where the session scored it, else
AlexNet) against training time, one point per recipe (the mean over its seeds), with the Pareto
front, drawn by the sweep dashboard's plot.

    python experiments/fast_recipes/frontier.py experiments/fast_recipes/h100_2026-12-05 [--out PNG]

The folder is one session's: runs/<recipe>_r<seed>.json (summary.json copies) and
scores_*/<recipe>_r<seed>.json (score.py's), as experiments/peers/table.py reads them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "experiments" / "peers"))

from gsexp.dashboard import plot_quality_vs_speed, variant_means  # noqa: E402
from table import rows as session_rows  # noqa: E402  (experiments/peers/table.py)


def points(root: Path) -> tuple[list[dict], str]:
    """One dashboard point per recipe, from the runs that have 200-view scores, and the LPIPS net."""
    scored = [r for r in session_rows(root) if "psnr" in r]
    net = "vgg" if any(r.get("lpips_vgg") is not None for r in scored) else "alex"
    rows = [{"variant": r["trainer"], "status": "ok", "train_seconds": r["train_s"], "psnr": r["psnr"],
             "ssim": r["ssim"], "lpips": r.get(f"lpips_{net}"), "render_ms": None} for r in scored]
    return variant_means(rows), net


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python experiments/fast_recipes/frontier.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path)
    p.add_argument("--out", type=Path, help="default <folder>/quality_vs_train_time.png")
    a = p.parse_args(argv)
    if not (a.folder / "runs").is_dir():
        p.error(f"{a.folder}: no runs/ folder (a session's files, as experiments/fast_recipes/session.sh leaves them)")
    pts, net = points(a.folder)
    if not pts:
        p.error(f"{a.folder}: no run has 200-view scores (scores_*/<run>.json)")
    out = a.out or a.folder / "quality_vs_train_time.png"
    title = f"lego, 200 test views, LPIPS on {'VGG' if net == 'vgg' else 'AlexNet'}"
    plot_quality_vs_speed(pts, out, title, x="train_seconds")
    for q in sorted(pts, key=lambda q: q["train_seconds"]):
        print(f"{q['variant']:>12}: {q['train_seconds']:6.1f} s  {q['psnr']:.2f} dB  LPIPS {q['lpips']:.4f}  "
              f"({q['runs']} run(s))")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
