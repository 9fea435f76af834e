"""(tile, Gaussian) pairs per intersect mode on biker's orbit views, from the torch reference's
preprocess and duplicate (CPU is enough: no blending):

    python experiments/tight_intersection/pairs.py --ply ../shared/data/scenes/biker.compressed.ply \
        [--scales 1,2] [--json pairs.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from gsexp.bench.cameras import orbit_cameras, parse_up
from gsexp.gaussians import load_ply
from gsexp.render.constants import INTERSECTS
from gsexp.render.reference import duplicate, preprocess


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ply", type=Path, required=True)
    p.add_argument("--scales", default="1,2")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    g = load_ply(args.ply)
    rows = []
    with torch.no_grad():
        for s in (int(v) for v in args.scales.split(",")):
            cams, _ = orbit_cameras(g.means, 8, 1920 * s, 1080 * s, up=parse_up("-y"), fov_deg=50.0)
            counts = {m: [] for m in INTERSECTS}
            visible = {m: [] for m in INTERSECTS}
            for cam in cams:
                for mode in INTERSECTS:
                    proj = preprocess(g, cam, intersect=mode)
                    counts[mode].append(len(duplicate(proj)[0]))
                    visible[mode].append(int((proj.radii > 0).sum()))
            for mode in INTERSECTS:
                rows.append({"resolution": f"{1920 * s}x{1080 * s}", "intersect": mode,
                             "pairs_mean": sum(counts[mode]) / len(cams), "pairs": counts[mode],
                             "visible_mean": sum(visible[mode]) / len(cams)})
    print(f"{'size':>9s} {'intersect':>9s} {'pairs (mean of 8 views)':>24s} {'vs aabb':>8s} {'visible':>9s}")
    for r in rows:
        base = next(q for q in rows if q["resolution"] == r["resolution"] and q["intersect"] == "aabb")
        print(f"{r['resolution']:>9s} {r['intersect']:>9s} {r['pairs_mean']:24,.0f} "
              f"{r['pairs_mean'] / base['pairs_mean']:8.3f} {r['visible_mean']:9,.0f}")
    if args.json:
        args.json.write_text(json.dumps({"ply": str(args.ply), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
