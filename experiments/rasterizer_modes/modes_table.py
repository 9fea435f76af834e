"""The rasterizer-modes study's table (issue 38) from session.sh's folder:

    python experiments/rasterizer_modes/modes_table.py /tmp/peers/modes

One row per run (<data>_<raster>_<mode>): the quick-mode test scores at the training resolution
(summary.json), PSNR at 1/2x and 2x it (gsexp.eval with data.downscale 4 and 1), Gaussians,
training time, the render time, and for tc_gs the PSNR of its fp16 image against fp32 vanilla's
with the same mode (python -m gsexp.bench). Missing parts print as a dash.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def read(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def row(folder: Path, run: Path) -> str:
    name, s = run.name, read(run / "summary.json") or {}
    scale = {ds: (read(folder / "eval" / f"{name}_ds{ds}" / "metrics.json") or {}).get("mean", {}) for ds in (4, 1)}
    bench = read(folder / "bench" / f"{name}.json")
    fp16 = None
    if bench:  # the second rasterizer (tc_gs) against the first (fp32 vanilla)
        fp16 = bench["rasterizers"][1].get("psnr")
    cells = [name, fmt(s.get("psnr"), ".2f"), fmt(s.get("ssim"), ".4f"), fmt(s.get("lpips"), ".4f"),
             fmt(scale[4].get("psnr"), ".2f"), fmt(scale[1].get("psnr"), ".2f"), fmt(s.get("num_gaussians"), ","),
             fmt(s.get("train_seconds"), ".1f"), fmt(s.get("render_ms"), ".2f"), fmt(fp16, ".1f")]
    return "| " + " | ".join(cells) + " |"


def table(folder: Path) -> str:
    runs = sorted(p for p in (folder / "runs").iterdir() if p.is_dir())
    head = ("| run | PSNR | SSIM | LPIPS-Alex | PSNR 1/2x | PSNR 2x | Gaussians | train s | render ms "
            "| tc_gs fp16 vs fp32 dB |")
    return "\n".join([head, "|" + "---|" * 10, *(row(folder, r) for r in runs)])


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/peers/modes")
    if not (folder / "runs").is_dir():
        sys.exit(f"modes_table.py: {folder} has no runs/ folder (session.sh's output)")
    print(table(folder))
