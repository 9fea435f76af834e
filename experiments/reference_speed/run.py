"""Speed of the pure-PyTorch reference rasterizer on this CPU.

    python experiments/reference_speed/run.py [--shared ../shared] [--repeats 5]

Cases (200x200 unless noted):
- lego_random_init: a lego test camera, 50K Gaussians initialised as 3DGS does for a
  Blender scene (uniform in [-1.3, 1.3]^3, kNN scales, opacity 0.1). The worst case:
  nothing is opaque, so every pixel blends ~270 Gaussians before it saturates.
- lego_fitted (with --lego-ply): the same 50K after fit_lego.py has fitted them to lego
  (opacities polarised, as in a scene being trained), on the same camera.
- biker_50k: 50K Gaussians drawn from a trained scene (biker), framed at 200x200.
Times: median of --repeats runs after one warm-up, forward without grad and forward +
backward. Prints a table and writes results.json beside this file.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from gsexp.gaussians import Gaussians, load_ply
from gsexp.paths import shared_dir
from gsexp.render import make_settings, render
from gsexp.scene import framing_camera, load_scene

HERE = Path(__file__).resolve().parent


def timed(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name, g, cam, repeats):
    def forward():
        with torch.no_grad():
            return render(g, cam)

    def train_step():
        x = g.detach().requires_grad_()
        render(x, cam).image.sum().backward()

    with torch.no_grad():  # the stage times from a render of their own (timing syncs per stage)
        out = render(g, cam, make_settings("torch", timing=True))
    row = dict(case=name, gaussians=len(g), width=cam.width, height=cam.height,
               mean_contributors_scanned=round(out.n_contrib.float().mean().item(), 1),
               forward_s=round(timed(forward, repeats), 3),
               forward_backward_s=round(timed(train_step, repeats), 3),
               stage_ms={k: round(v, 1) for k, v in out.stage_ms.items()})
    print(row, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=shared_dir())
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=HERE / "results.json")
    ap.add_argument("--lego-ply", help="Gaussians fitted by fit_lego.py")
    args = ap.parse_args()
    shared = Path(args.shared)
    torch.manual_seed(0)
    rows = []
    lego = load_scene("blender", shared / "data/nerf_synthetic/lego", downscale=4)
    g = Gaussians.random(50_000, (0, 0, 0), 1.3, sh_degree=3)
    rows.append(measure("lego_random_init", g, lego.test_cameras[0], args.repeats))
    if args.lego_ply:
        rows.append(measure("lego_fitted", load_ply(args.lego_ply), lego.test_cameras[0], args.repeats))
    biker = load_ply(shared / "data/scenes/biker.compressed.ply")
    sub = biker[torch.randperm(len(biker))[:50_000]]
    rows.append(measure("biker_50k", sub, framing_camera(biker.means, 200, 200), args.repeats))
    Path(args.out).write_text(json.dumps({"threads": torch.get_num_threads(), "rows": rows}, indent=1))
    print(f"\n{'case':>18} {'N':>7} {'size':>8} {'scanned/px':>10} {'fwd s':>7} {'fwd+bwd s':>9}")
    for r in rows:
        print(f"{r['case']:>18} {r['gaussians']:>7} {r['width']}x{r['height']:<4} "
              f"{r['mean_contributors_scanned']:>10} {r['forward_s']:>7} {r['forward_backward_s']:>9}")


if __name__ == "__main__":
    main()
