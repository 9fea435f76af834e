"""Screen-space gradients, ours vs gsplat, on one lego training view: the statistic the
densification reads (|d loss / d means2d| in NDC units) for the same Gaussians and loss.

    python experiments/vanilla_cuda/grad_vs_gsplat.py --data <lego> [--checkpoint run/...pt]

Prints the ratio of the two gradient norms and how many Gaussians each puts over 0.0002."""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from gsexp import metrics
from gsexp.bench.models import load_checkpoint_gaussians
from gsexp.bench.peers import gsplat_render
from gsexp.gaussians import Gaussians
from gsexp.render import make_settings, render
from gsexp.scene.blender import load_blender


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--views", type=int, default=4)
    args = p.parse_args()
    scene = load_blender(args.data, splits={"train": ("train",), "test": ("train",)}, test_stride=100)
    if args.checkpoint:
        g0 = load_checkpoint_gaussians(args.checkpoint)
    else:
        gen = torch.Generator().manual_seed(0)
        g0 = Gaussians.random(100_000, (0.0, 0.0, 0.0), 0.3 * scene.extent, sh_degree=3, generator=gen)
    g0 = g0.to("cuda")
    for v in range(args.views):
        cam, target = scene.train_cameras[v], scene.train_images[v].cuda()
        grads = {}
        for name in ("ours", "gsplat"):
            g = g0.map(lambda t: t.detach().clone().requires_grad_())
            if name == "ours":
                out = render(g, cam, make_settings("vanilla"), background=tuple(scene.background))
                image, m2d = out.image, out.means2d
            else:  # packed=False: means2d [1, N, 2], one row per Gaussian as ours
                image, _, meta = gsplat_render(g, cam, tuple(scene.background), packed=False)
                m2d = meta["means2d"]
                m2d.retain_grad()
            loss = 0.8 * (image - target).abs().mean() + 0.2 * (1 - metrics.ssim(image, target))
            loss.backward()
            grads[name] = (m2d.grad.reshape(-1, 2) * torch.tensor([cam.width / 2, cam.height / 2],
                                                                  device="cuda")).norm(dim=-1)
            grads[name + "_loss"] = loss.item()
        a, b = grads["ours"], grads["gsplat"]
        both = (a > 0) & (b > 0)
        print(f"view {v}: loss ours {grads['ours_loss']:.5f} gsplat {grads['gsplat_loss']:.5f}; "
              f"sum |grad| ours/gsplat {a.sum().item() / b.sum().item():.4f}; "
              f"median ratio {(a[both] / b[both]).median().item():.4f}; "
              f"over 2e-4: ours {(a >= 2e-4).sum().item()}, gsplat {(b >= 2e-4).sum().item()}")


if __name__ == "__main__":
    main()
