"""Fit 50K Gaussians to lego with the CPU reference (no densification), so the speed
benchmark can time a lego that looks like lego rather than the random initial cloud.

    python experiments/reference_speed/fit_lego.py --steps 600 --out /tmp/lego_50k.ply

A plain Adam loop over L1 loss at 1/8 resolution (100x100), 3DGS learning rates;
the trainer (train.py) is the real recipe. Prints the test PSNR at the end.
"""
from __future__ import annotations

import argparse
import time

import torch

from gsexp.gaussians import Gaussians, save_ply
from gsexp.metrics import psnr
from gsexp.paths import shared_dir
from gsexp.render import render
from gsexp.scene import load_scene


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--num", type=int, default=50_000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    scene = load_scene("blender", shared_dir() / "data/nerf_synthetic/lego", downscale=8)
    g = Gaussians.random(args.num, (0, 0, 0), 1.3, sh_degree=0).requires_grad_()
    lrs = {"means": 1.6e-4 * scene.extent, "sh": 2.5e-3, "opacity_logits": 0.05,
           "log_scales": 5e-3, "quats": 1e-3}
    opt = torch.optim.Adam([{"params": [getattr(g, k)], "lr": lr} for k, lr in lrs.items()], eps=1e-15)
    bg = scene.background
    start = time.perf_counter()
    for step in range(args.steps):
        i = torch.randint(len(scene.train_images), ()).item()
        out = render(g, scene.train_cameras[i], background=bg)
        loss = (out.image - scene.train_images[i]).abs().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f} {time.perf_counter() - start:.0f}s", flush=True)
    with torch.no_grad():
        scores = [psnr(render(g, c, background=bg).image, img).item()
                  for c, img in zip(scene.test_cameras[::20], scene.test_images[::20])]
    print(f"test PSNR {sum(scores) / len(scores):.2f} dB after {args.steps} steps, "
          f"{time.perf_counter() - start:.0f}s")
    save_ply(g.detach(), args.out)


if __name__ == "__main__":
    main()
