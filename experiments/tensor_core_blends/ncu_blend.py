"""One render per blend variant of one biker orbit view, for Nsight Compute to profile:

    ncu --clock-control none -k regex:blend --section SpeedOfLight ... \
        python experiments/tensor_core_blends/ncu_blend.py --ply <biker.ply> [--width 1920 --height 1080]

Each variant renders twice (the first launch is a warm-up: pass --launch-skip to ncu or read
the second of each pair). The order is the order of --rasterizers."""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from gsexp.bench.cameras import orbit_cameras, parse_up
from gsexp.bench.rasterizers import gsexp_rasterizer
from gsexp.gaussians import load_ply

SPECS = "vanilla,gemm_gs:precision=fp16,tc_gs:precision=fp16,tc_gs:precision=tf32"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ply", type=Path, required=True)
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--rasterizers", default=SPECS)
    args = p.parse_args()
    g = load_ply(args.ply).to("cuda")
    cams, _ = orbit_cameras(g.means, 8, args.width, args.height, up=parse_up("-y"), fov_deg=50.0)
    cam = cams[0].to("cuda")
    with torch.no_grad():
        for spec in args.rasterizers.split(","):
            r = gsexp_rasterizer(spec, g, (0.0, 0.0, 0.0))
            for _ in range(2):
                r.render(cam, False)
            torch.cuda.synchronize()
            print(spec, "rendered")


if __name__ == "__main__":
    main()
