"""Where a frame's time goes, per kernel, for gsexp's rasterizers and gsplat's (main's
`rasterization()` and its HiGS renderer): the render half of the peer study's per-stage profile
(issue 36). Orbit cameras as `python -m gsexp.bench`; after a warm-up, N frames per rasterizer
under torch.profiler; every CUDA kernel, memset and copy summed, in ms per frame.

    python experiments/peers/profile_render.py --ply lego_3M.ply --up z \
        --rasterizers tc_gs:intersect=accutile,gsplat_higs --frames 20 --json out.json"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from gsexp.bench.cameras import orbit_cameras, parse_up
from gsexp.bench.rasterizers import make_rasterizer
from gsexp.gaussians import load_ply


def kernel_ms(r, cameras, frames: int, cuda: bool) -> dict[str, float]:
    """ms per frame by kernel (on a CPU: by op, self time)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for i in range(frames):
            r.render(cameras[i % len(cameras)], False)
        if cuda:
            torch.cuda.synchronize()
    totals: dict[str, float] = {}
    if cuda:
        for e in prof.events():
            if e.device_type == DeviceType.CUDA:  # kernels only: an op's row would count them again
                totals[e.name] = totals.get(e.name, 0.0) + e.device_time_total / 1e3 / frames
    else:
        totals = {e.key: e.self_cpu_time_total / 1e3 / frames for e in prof.key_averages()}
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ply", type=Path, required=True)
    p.add_argument("--up", default="-y", help="world up as python -m gsexp.bench's (z for lego)")
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--num-cameras", type=int, default=4)
    p.add_argument("--rasterizers", default="vanilla:intersect=accutile,tc_gs:intersect=accutile,gsplat,gsplat_higs")
    p.add_argument("--warmup", type=int, default=5, help="frames per camera before the profile")
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    if not a.ply.is_file():
        p.error(f"--ply {a.ply}: no such file")
    cuda = torch.cuda.is_available()  # without one, the torch reference's ops (--rasterizers torch)
    g = load_ply(a.ply).to(torch.device("cuda" if cuda else "cpu"))
    cameras, _ = orbit_cameras(g.means, a.num_cameras, a.width, a.height, up=parse_up(a.up))
    cameras = [c.to(g.means.device) for c in cameras]
    report = {"ply": str(a.ply), "num_gaussians": len(g), "resolution": f"{a.width}x{a.height}",
              "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__, "frames": a.frames,
              "rasterizers": {}}
    for spec in filter(None, a.rasterizers.split(",")):
        try:
            r = make_rasterizer(spec, g, (0.0, 0.0, 0.0))
        except ImportError as e:
            print(f"{spec}: skipped ({e})", file=sys.stderr)
            continue
        except ValueError as e:  # a misspelled variant or switch (the bench's parser names it)
            p.error(f"--rasterizers {spec!r}: {e}")
        for cam in cameras:
            for _ in range(a.warmup):
                r.render(cam, False)
        ms = kernel_ms(r, cameras, a.frames, cuda)
        report["rasterizers"][r.name] = {"total_ms": sum(ms.values()), "kernels": len(ms), "top": ms}
        print(f"\n{r.name}: {sum(ms.values()):.3f} ms of {'kernels' if cuda else 'CPU ops'} per frame, {len(ms)} kinds")
        for name, v in list(ms.items())[:a.top]:
            print(f"  {v:8.4f}  {name[:110]}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
