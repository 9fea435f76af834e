"""Fit 50K Gaussians to lego with the CPU reference (no densification), so the speed
benchmark can time a lego that looks like lego rather than the random initial cloud.

    python experiments/reference_speed/fit_lego.py --steps 600 --out /tmp/lego_50k.ply

A plain Adam loop over L1 loss at 1/8 resolution (100x100), with the trainer's parameters
and optimizers (3DGS learning rates, constant); the trainer (train.py) is the real recipe. Prints the test PSNR at the end.
"""
from __future__ import annotations

import argparse
import time

import torch

from gsexp.gaussians import Gaussians, make_params, save_ply, to_gaussians
from gsexp.metrics import psnr
from gsexp.paths import shared_dir
from gsexp.render import render
from gsexp.scene import load_scene
from gsexp.train.params import make_optimizers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--num", type=int, default=50_000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    scene = load_scene("blender", shared_dir() / "data/nerf_synthetic/lego", downscale=8)
    params = make_params(Gaussians.random(args.num, (0, 0, 0), 1.3, sh_degree=0))
    opts = make_optimizers(params, scene.extent)
    bg = scene.background
    start = time.perf_counter()
    for step in range(args.steps):
        i = torch.randint(len(scene.train_images), ()).item()
        out = render(to_gaussians(params, 0), scene.train_cameras[i], background=bg)  # a fresh view per step
        loss = (out.image - scene.train_images[i]).abs().mean()
        for opt in opts.values():
            opt.zero_grad(set_to_none=True)
        loss.backward()
        for opt in opts.values():
            opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f} {time.perf_counter() - start:.0f}s", flush=True)
    with torch.no_grad():
        g = to_gaussians(params, 0)
        scores = [psnr(render(g, c, background=bg).image, img).item()
                  for c, img in zip(scene.test_cameras[::20], scene.test_images[::20])]
    print(f"test PSNR {sum(scores) / len(scores):.2f} dB after {args.steps} steps, "
          f"{time.perf_counter() - start:.0f}s")
    save_ply(g.detach(), args.out)


if __name__ == "__main__":
    main()
