"""A/B of the blend's tile order in one process: longest list first (the default) against
raster order (the setting tile_order=raster), interleaved frame by frame on biker orbit views.

    python experiments/tensor_core_blends/tile_order_ab.py --ply <biker.ply> [--scales 1,2] [--json out.json]

Prints, per variant and resolution, the median blend-stage and end-to-end ms of each order
and their ratio, and checks that the images of the two orders are identical (the order moves
work between SMs, never between pixels)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from gsexp.bench.cameras import orbit_cameras, parse_up
from gsexp.bench.rasterizers import gsexp_rasterizer
from gsexp.bench.timing import timed
from gsexp.gaussians import load_ply

SPECS = "vanilla,gemm_gs:precision=fp16,tc_gs:precision=fp16"
ORDERS = ("heavy_first", "raster")


def measure(spec: str, g, cams, frames: int) -> dict:
    """Median blend and end-to-end ms per order, frames interleaved; max image difference."""
    rasts = {order: gsexp_rasterizer(f"{spec}:tile_order={order}", g, (0.0, 0.0, 0.0)) for order in ORDERS}
    blend = {k: [] for k in ORDERS}
    e2e = {k: [] for k in ORDERS}
    diff = 0.0
    for cam in cams:
        first = {}
        for order, r in rasts.items():  # warm-up, and the images to compare
            for _ in range(3):
                first[order] = r.render(cam, False)[0]
        diff = max(diff, (first["heavy_first"] - first["raster"]).abs().max().item())
        for _ in range(frames):
            for order, r in rasts.items():
                _, ms = timed(lambda: r.render(cam, False), torch.device("cuda"))
                e2e[order].append(ms)
                blend[order].append(r.render(cam, True)[1]["blend"])
    return {"blend_ms": {k: float(np.median(v)) for k, v in blend.items()},
            "e2e_ms": {k: float(np.median(v)) for k, v in e2e.items()}, "max_image_diff": diff}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ply", type=Path, required=True)
    p.add_argument("--scales", default="1,2")
    p.add_argument("--frames", type=int, default=10)
    p.add_argument("--rasterizers", default=SPECS)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    g = load_ply(args.ply).to("cuda")
    rows = []
    with torch.no_grad():
        for s in (int(v) for v in args.scales.split(",")):
            w, h = 1920 * s, 1080 * s
            cams, _ = orbit_cameras(g.means, 8, w, h, up=parse_up("-y"), fov_deg=50.0)
            cams = [c.to("cuda") for c in cams]
            for spec in args.rasterizers.split(","):
                m = measure(spec, g, cams, args.frames)
                rows.append({"rasterizer": spec, "resolution": f"{w}x{h}", **m})
    print(f"{'rasterizer':34s} {'size':>9s} {'blend heavy':>11s} {'blend raster':>12s} {'ratio':>6s} "
          f"{'e2e heavy':>9s} {'e2e raster':>10s} {'ratio':>6s} {'img diff':>8s}")
    for r in rows:
        b, e = r["blend_ms"], r["e2e_ms"]
        print(f"{r['rasterizer']:34s} {r['resolution']:>9s} {b['heavy_first']:11.3f} {b['raster']:12.3f} "
              f"{b['raster'] / b['heavy_first']:6.3f} {e['heavy_first']:9.3f} {e['raster']:10.3f} "
              f"{e['raster'] / e['heavy_first']:6.3f} {r['max_image_diff']:8.1e}")
    print("(medians in ms over 8 orbit views x frames, the two orders interleaved; ratio = raster / heavy-first)")
    if args.json:
        args.json.write_text(json.dumps({"command": "tile_order_ab.py " + " ".join(
            f"--{k} {v}" for k, v in vars(args).items() if k not in ("json",)), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
