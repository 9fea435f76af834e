"""Gradient error of the blend backward in GEMM form (issue 20) against float64, per operand
format, on the CPU reference (gsexp/render/reference/gemm_backward.py).

    python experiments/tensor_core_backward/numerics.py [--seeds 5] [--n 300] [--size 96x72]

For each random scene (tests/render_helpers.random_scene) the loss is <w, image> with random
weights on the pixels whose threshold decisions are stable; the float64 gradient
comes from an independent dense renderer (render_helpers.dense_render64). Prints the median
over seeds of |g - g64| / |g64| per parameter, for the exact fp32 backward and each GEMM form.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from render_helpers import dense_render64, random_scene, stable_pixels  # noqa: E402

from gsexp.render import render  # noqa: E402
from gsexp.render.settings import BACKWARDS, TorchSettings  # noqa: E402

PARAMS = ("means", "log_scales", "quats", "opacity_logits")
BG = (0.3, 0.1, 0.6)


def gradients(g, cam, weights, settings=None) -> dict:
    if settings is None:  # float64, dense
        leaves = g.map(lambda t: t.detach().double().requires_grad_())
        (dense_render64(leaves, cam, BG)[0] * weights.double()).sum().backward()
    else:
        leaves = g.map(lambda t: t.detach().clone().requires_grad_())
        (render(leaves, cam, settings, background=BG).image * weights).sum().backward()
    return {k: getattr(leaves, k).grad.double() for k in PARAMS}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--size", default="96x72")
    p.add_argument("--blend", default="tcgs")
    a = p.parse_args(argv)
    width, height = map(int, a.size.split("x"))
    errors = {b: {k: [] for k in PARAMS} for b in BACKWARDS}
    for seed in range(a.seeds):
        g, cam = random_scene(seed, n=a.n, width=width, height=height, sh_degree=1)
        gen = torch.Generator().manual_seed(seed)
        stable = stable_pixels(g, cam)
        weights = torch.rand(3, height, width, generator=gen) * stable
        ref = gradients(g, cam, weights)
        for b in BACKWARDS:
            got = gradients(g, cam, weights, TorchSettings(blend=a.blend, backward=b))
            for k in PARAMS:
                errors[b][k].append((got[k] - ref[k]).norm().item() / ref[k].norm().item())
    print(f"blend={a.blend}, {a.seeds} scenes of {a.n} Gaussians at {width}x{height}: median |g - g64| / |g64|")
    print_table(errors, PARAMS)


def print_table(errors: dict, params) -> None:
    """Rows: backward -> tensor -> errors over the scenes; prints their medians."""
    print("| backward | " + " | ".join(params) + " |")
    print("|---|" + "---|" * len(params))
    for row, per_tensor in errors.items():
        print(f"| {row} | " + " | ".join(f"{statistics.median(per_tensor[k]):.1e}" for k in params) + " |")


if __name__ == "__main__":
    main()
