"""Issue 38: do the preprocess kernels from before the modes and the current ones compute the same
gradients? defaults_unchanged.py found trained scenes' log_scales and quats gradients differing
before/after by more than run to run, through the whole backward, whose blend part sums with
atomics. Here the preprocess runs alone (preprocess_ab.cu), forward and backward, on fixed
random upstream gradients: no atomics, so each build is deterministic and any difference is the
kernels' own.

    python experiments/rasterizer_modes/preprocess_ab.py --before /tmp/modes_before --ply lego.ply

--before: the old source tree (defaults_unchanged.sh's /tmp/modes_before). Both builds use
gsexp's own nvcc flags. Prints, per output, whether the two builds agree bit for bit, how many
values differ and the relative-norm difference; each build is also run twice (it must agree with
itself). Exit status 1 when a forward output differs or a build disagrees with itself.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
OUTPUTS = ("means2d", "conic_opacity", "colors", "depths", "radii",
           "grad_means", "grad_log_scales", "grad_quats", "grad_opacity_logits", "grad_sh")


def build(name: str, csrc: Path, build_dir: Path):
    from torch.utils.cpp_extension import load

    from gsexp.render.cuda.build import NVCC_FLAGS, arch_flags

    filter2d = "struct Filter2D" in (csrc / "kernels.h").read_text()
    build_dir.mkdir(parents=True, exist_ok=True)
    return load(name=name, sources=[str(HERE / "preprocess_ab.cu"), str(csrc / "preprocess.cu")],
                extra_include_paths=[str(csrc)], extra_cflags=["-O3"],
                extra_cuda_cflags=NVCC_FLAGS + arch_flags() + (["-DGSEXP_FILTER2D"] if filter2d else []),
                build_directory=str(build_dir), verbose=False)


def inputs(ply: str, seed: int = 0):
    """The model's raw parameters, a camera framing it, and fixed random upstream gradients."""
    from gsexp.gaussians import load_ply
    from gsexp.render.cuda.function import camera_values
    from gsexp.scene import framing_camera

    g = load_ply(ply)
    cam = framing_camera(g.means, 1280, 720)
    n = len(g.means)
    gen = torch.Generator().manual_seed(seed)
    upstream = [torch.randn(n, k, generator=gen) * 1e-3 for k in (2, 3)] + \
               [torch.randn(n, generator=gen) * 1e-3, torch.randn(n, 3, generator=gen) * 1e-3]
    params = [g.means, g.log_scales, g.quats, g.opacity_logits, g.sh]
    cuda = [t.detach().float().contiguous().cuda() for t in params]
    return cuda, g.sh_degree, list(camera_values(cam)), [t.cuda() for t in upstream]


def compare(a: list, b: list) -> list[tuple]:
    rows = []
    for name, x, y in zip(OUTPUTS, a, b):
        same = bool(torch.equal(x, y))
        differ = int((x != y).sum())
        xf, yf = x.double(), y.double()
        rel = float((xf - yf).norm() / xf.norm().clamp_min(1e-300))
        rows.append((name, same, differ, x.numel(), rel))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, required=True, help="the old source tree (its csrc/ is built)")
    p.add_argument("--ply", required=True)
    p.add_argument("--build-dir", type=Path, default=Path("/tmp/preprocess_ab"))
    a = p.parse_args(argv)
    old = build("preprocess_ab_before", a.before / "csrc", a.build_dir / "before")
    new = build("preprocess_ab_after", HERE.parents[1] / "csrc", a.build_dir / "after")
    params, degree, cam, upstream = inputs(a.ply)
    runs = {}
    for side, module in (("before", old), ("after", new)):
        runs[side] = [module.run(*params, degree, cam, *upstream) for _ in range(2)]
        torch.cuda.synchronize()
    bad = 0
    for side in runs:  # each build against itself
        rows = compare(*runs[side])
        unstable = [r[0] for r in rows if not r[1]]
        print(f"{side} against itself: {'the same bits' if not unstable else 'DIFFERS in ' + ', '.join(unstable)}")
        bad += bool(unstable)
    print(f"{len(params[0])} Gaussians, {int((runs['after'][0][4] > 0).sum())} visible; before against after:")
    print(f"{'output':<22} {'bit for bit':>11} {'values differing':>18} {'relative norm':>14}")
    for name, same, differ, total, rel in compare(runs["before"][0], runs["after"][0]):
        print(f"{name:<22} {'yes' if same else 'no':>11} {differ:>9} of {total:<8} {rel:>12.2e}")
        bad += not same and not name.startswith("grad_")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
