"""Models of a chosen size from a trained one, for scaling studies (issue 23).

    python -m gsexp.bench.grow <model: .ply | .pt | run dir> <out.ply> --gaussians 4M [--seed 0]

Growing splits the largest Gaussians in two, as 3DGS densification does (children sampled
from the parent, scales / 1.6; gsexp.gaussians.surgery.split), round after round until the
count is reached: the model keeps its look and gains the many small, overlapping Gaussians of a
real capture. Shrinking keeps the Gaussians with the largest opacity × volume. SH is padded to
`--sh-degree` (default 3). Runs on the CPU, so a seed gives the same PLY on any machine."""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import torch

from gsexp.gaussians import Gaussians, save_ply
from gsexp.gaussians.params import make_params, to_gaussians
from gsexp.gaussians.surgery import split

_UNITS = {"": 1, "K": 1_000, "M": 1_000_000}


def parse_count(text: str) -> int:
    """'250K', '1.5M', '300000' -> an int >= 1."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmM]?)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a count: give e.g. 300000, 250K or 1.5M")
    n = round(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n < 1:
        raise ValueError(f"{text!r}: a model needs at least one Gaussian")
    return n


def resize(g: Gaussians, n: int, seed: int = 0) -> Gaussians:
    """`g` with exactly `n` Gaussians (see the module's doc). Deterministic for a seed on one device."""
    if n < 1:
        raise ValueError(f"resize: n must be >= 1, got {n}")
    if n <= len(g):  # keep the most visible: opacity x volume
        score = g.opacities * g.log_scales.sum(1).exp()
        return g[score.topk(n).indices.sort().values]
    generator = torch.Generator(device=g.device).manual_seed(seed)
    params = make_params(g)
    while (have := params["means"].shape[0]) < n:
        biggest = params["log_scales"].detach().amax(1).topk(min(n - have, have)).indices
        mask = torch.zeros(have, dtype=torch.bool, device=g.device)
        mask[biggest] = True
        split(params, {}, mask, 2, generator=generator)
    return to_gaussians(params, g.sh_degree).detach()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gsexp.bench.grow", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path, help="a PLY (INRIA or compressed), trainer checkpoint or run directory")
    p.add_argument("out", type=Path, help="the PLY to write (INRIA layout)")
    p.add_argument("--gaussians", required=True, help="the size: e.g. 250K, 1M, 6M")
    p.add_argument("--sh-degree", type=int, default=3, choices=range(4))
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        n = parse_count(a.gaussians)
    except ValueError as e:
        p.error(f"--gaussians {e}")
    if a.out.suffix.lower() != ".ply":
        p.error(f"{a.out}: the output must be a .ply file")
    from gsexp.bench.models import load_gaussians

    try:
        g = load_gaussians(a.model)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        p.error(f"{a.model}: cannot read a model from it: {e}")
    start = time.perf_counter()
    out = resize(g.with_sh_degree(a.sh_degree), n, a.seed)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_name(a.out.name + ".part")  # a crash never leaves a half-written PLY under the name
    save_ply(out, tmp)
    tmp.replace(a.out)
    print(f"{a.out}: {len(out):,} Gaussians (SH degree {a.sh_degree}) from {len(g):,} in {a.model}, "
          f"seed {a.seed}, {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
