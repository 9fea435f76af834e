"""Each intersect mode's image of biker against the exhaustive reference (every Gaussian
against every pixel, float64, no tiles; gsexp/render/reference/exhaustive.py), on the torch reference:

    python experiments/tight_intersection/biker_exhaustive.py --ply ../shared/data/scenes/biker.compressed.ply \
        [--width 240 --height 135] [--json biker_exhaustive.json]

About 10 minutes on 2 CPU cores at 240x135 (the exhaustive pass is most of it)."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from gsexp import metrics
from gsexp.bench.cameras import core_camera
from gsexp.gaussians import load_ply
from gsexp.render import make_settings, render
from gsexp.render.constants import INTERSECTS
from gsexp.render.reference.exhaustive import exhaustive_render64


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ply", type=Path, required=True)
    p.add_argument("--width", type=int, default=240)
    p.add_argument("--height", type=int, default=135)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    g = load_ply(args.ply)
    cam = core_camera(g, args.width, args.height)
    start = time.perf_counter()
    exhaustive, _ = exhaustive_render64(g, cam, chunk=512)
    seconds = time.perf_counter() - start
    modes = {}
    with torch.no_grad():
        for mode in INTERSECTS:
            r = render(g.map(lambda t: t.double()), cam, make_settings("torch", intersect=mode))
            diff = (r.image - exhaustive).abs()
            modes[mode] = {"max_abs": diff.max().item(), "pixels_over_1e-5": int((diff.amax(0) > 1e-5).sum()),
                           "psnr_vs_exhaustive": metrics.psnr(r.image.float().clamp(0, 1),
                                                              exhaustive.float().clamp(0, 1)).item(),
                           "pairs": r.num_pairs}
            print(mode, modes[mode])
    report = {"camera": f"core_camera(g, {args.width}, {args.height})", "gaussians": len(g.means),
              "exhaustive_seconds": seconds, "modes": modes}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
