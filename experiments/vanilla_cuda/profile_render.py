"""Where a render's time goes: torch.profiler over N renders of ours and of gsplat.

    python experiments/vanilla_cuda/profile_render.py --ply <scene.ply> [--width 1920 --height 1080]

Prints, per rasterizer: the host time of one call (launch overhead, no sync), the end-to-end
time, and each kernel's GPU time per render. Writes nothing; the figures go in the README."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from gsexp.bench.cameras import orbit_cameras, parse_up
from gsexp.bench.peers import gsplat_rasterizer
from gsexp.bench.rasterizers import gsexp_rasterizer
from gsexp.bench.timing import timed
from gsexp.gaussians import load_ply


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ply", type=Path, required=True)
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--rasterizers", default="vanilla", help="bench specs (python -m gsexp.bench)")
    args = p.parse_args()
    g = load_ply(args.ply).to("cuda")
    cams, _ = orbit_cameras(g.means, 8, args.width, args.height, up=parse_up("-y"), fov_deg=50.0)
    cams = [c.to("cuda") for c in cams]
    rasts = [gsexp_rasterizer(s, g, (0.0, 0.0, 0.0)) for s in args.rasterizers.split(",")]
    try:
        rasts.append(gsplat_rasterizer(g, (0.0, 0.0, 0.0)))
    except ImportError as e:
        print(f"gsplat: skipped ({e})")
    with torch.no_grad():
        for r in rasts:
            for cam in cams:
                r.render(cam, False)
            host, e2e = [], []
            for _ in range(args.frames):
                for cam in cams:
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    r.render(cam, False)
                    host.append((time.perf_counter() - t0) * 1e3)  # returns once the last launch is queued
                    torch.cuda.synchronize()
                    e2e.append(timed(lambda: r.render(cam, False), torch.device("cuda"))[1])
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(args.frames):
                    for cam in cams:
                        r.render(cam, False)
                torch.cuda.synchronize()
            n = args.frames * len(cams)
            print(f"\n== {r.name}: host per call {np.median(host):.3f} ms, end to end {np.median(e2e):.3f} ms "
                  f"(medians of {n})")
            # kernels and memsets only: torch ops and autograd ranges repeat their kernels' time
            events = [e for e in prof.key_averages()
                      if e.device_type == torch.autograd.DeviceType.CUDA and e.self_device_time_total > 0]
            events.sort(key=lambda e: -e.self_device_time_total)
            total = sum(e.self_device_time_total for e in events) / n / 1e3
            print(f"   GPU busy per render {total:.3f} ms")
            for e in events[:14]:
                print(f"   {e.self_device_time_total / n / 1e3:8.4f} ms  x{e.count / n:4.1f}  {e.key[:90]}")


if __name__ == "__main__":
    main()
