"""numerics.py's table for the CUDA kernels: the gradient error of backward=exact, gemm_fp32 and
gemm_tf32 (csrc/backward_gemm.cu) against the float64 reference (rasterizer=torch in float64,
exact backward), with the reference's fp32 emulation of gemm_tf32 beside them for comparison.

    python experiments/tensor_core_backward/cuda_numerics.py [--seeds 5] [--n 300] [--size 96x72]
        [--blend tcgs] [--precision fp32]

Scenes and loss as numerics.py: <w, image> with random weights on the pixels whose threshold
decisions are stable. The forward is fp32 (--precision) so that only the backward differs.
Prints the median over seeds of |g - g64| / |g64| per parameter. Needs a CUDA GPU; without one
it says so and exits."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from numerics import print_table  # noqa: E402
from render_helpers import random_scene, stable_pixels  # noqa: E402

from gsexp.render import render  # noqa: E402
from gsexp.render.settings import from_keywords, reference_of  # noqa: E402

PARAMS = ("means", "log_scales", "quats", "opacity_logits", "sh", "means2d")
BG = (0.3, 0.1, 0.6)
CUDA_MODES = ("exact", "gemm_fp32", "gemm_tf32")


def gradients(g, cam, weights, settings, dtype=torch.float32) -> dict:
    leaves = g.map(lambda t: t.detach().to(dtype).requires_grad_())
    out = render(leaves, cam, settings, background=BG)
    (out.image * weights).sum().backward()
    grads = {k: getattr(leaves, k).grad for k in PARAMS[:-1]}
    return {**grads, "means2d": out.means2d.grad}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--size", default="96x72")
    p.add_argument("--blend", default="tcgs", choices=("vanilla", "gemm", "tcgs"))
    p.add_argument("--precision", default="fp32", help="the matrix blends' forward operands")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("cuda_numerics.py: skipped, no CUDA GPU here (numerics.py is the CPU part)")
        return
    width, height = map(int, a.size.split("x"))
    switches = {} if a.blend == "vanilla" else {"precision": a.precision}
    cuda = {m: from_keywords("cuda", a.blend, backward=m, **switches) for m in CUDA_MODES}
    exact64 = reference_of(cuda["exact"])
    rows = {f"cuda {m}": s for m, s in cuda.items()}
    rows["torch gemm_tf32 (fp32, emulated)"] = reference_of(cuda["gemm_tf32"])
    errors = {r: {k: [] for k in PARAMS} for r in rows}
    for seed in range(a.seeds):
        g, cam = random_scene(seed, n=a.n, width=width, height=height, sh_degree=1)
        gen = torch.Generator().manual_seed(seed)
        weights = (torch.rand(3, height, width, generator=gen) * stable_pixels(g, cam)).cuda()
        g = g.to("cuda")
        ref = gradients(g, cam, weights, exact64, torch.float64)
        for r, s in rows.items():
            got = gradients(g, cam, weights, s)
            for k in PARAMS:
                errors[r][k].append((got[k].double() - ref[k]).norm().item() / ref[k].norm().item())
    extra = "".join(f" {k}={v}" for k, v in switches.items())
    print(f"blend={a.blend}{extra}, {a.seeds} scenes of {a.n} Gaussians at {width}x{height}, "
          f"{torch.cuda.get_device_name()}: median |g - g64| / |g64|, g64 from rasterizer=torch in float64")
    print_table(errors, PARAMS)


if __name__ == "__main__":
    main()
