"""Issue 38, on the CPU: are accutile's tile lists for test_cuda_antialiased's scene 2 (seed 2, 5,000
Gaussians, 320x240) the same whichever way they are computed? The reference's from an fp32 and an
fp64 preprocess, and the CPU build of csrc's preprocess + accutile (tests/preprocess_host.cpp)
against the reference, per Gaussian, in each of its 12 cases (0.3 and 0.1 px^2, antialiased or not).

    CUDA_HOME=/usr/local/cuda-13.0 python experiments/rasterizer_modes/tile_lists_cpu.py
"""
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import test_preprocess_host as host  # noqa: E402
from render_helpers import random_scene  # noqa: E402

from gsexp.render.reference import preprocess  # noqa: E402
from gsexp.render.reference.tiles import duplicate  # noqa: E402


def pair_set(g, cam, dilation, aa):
    ids, xy = duplicate(preprocess(g, cam, intersect="accutile", antialiased=aa, dilation=dilation))
    return set(zip(ids.tolist(), xy[:, 0].tolist(), xy[:, 1].tolist()))


def main():
    g, cam = random_scene(2, 5000, 320, 240, 1)
    g = g.map(lambda t: t.detach())
    for dilation in (0.3, 0.1):
        for aa in (False, True):
            a, b = pair_set(g.map(torch.Tensor.float), cam, dilation, aa), pair_set(g.map(torch.Tensor.double), cam, dilation, aa)
            print(f"reference, dilation {dilation} antialiased {aa}: {len(a)} pairs fp32, {len(b)} fp64, {len(a ^ b)} differ")
    n = len(g.means)
    sh16 = torch.zeros(n, 16, 3)
    sh16[:, :4] = g.sh
    g.sh, g.sh_degree, host.N = sh16, 3, n  # the harness stores 16 bases
    gen = torch.Generator().manual_seed(6)
    upstream = {k: torch.randn(n, d, generator=gen) for k, d in (("means2d", 2), ("conics", 3), ("colors", 3),
                                                              ("opacities", 1), ("depths", 1))}
    for contract in ("-ffp-contract=off", "-ffp-contract=fast -mfma"):  # as the reference; with nvcc's FMAs
        print(f"CPU build with {contract}:")
        with tempfile.TemporaryDirectory() as tmp:
            stdout, raw = host.run_host(Path(tmp), g, cam, upstream, contract)
        for line, ours in zip(stdout.splitlines(), host.cases(raw)):
            m = host.LINE.fullmatch(line)
            aa, dilation = m.group(3) is not None, float(m.group(4))
            ids, _ = duplicate(preprocess(g, cam, intersect="accutile", antialiased=aa, dilation=dilation))
            ref = torch.bincount(ids, minlength=n)
            mine = torch.where(ours["radii"][:, 0] > 0, ours["touched"][:, 0], 0).long()
            differ = (mine != ref).nonzero()[:, 0]
            print(f"  {line}: {int(mine.sum())} pairs, reference {int(ref.sum())}, {len(differ)} Gaussians differ"
                  + (f" (e.g. {differ[:3].tolist()}: {mine[differ[:3]].tolist()} against {ref[differ[:3]].tolist()})"
                     if len(differ) else ""))


if __name__ == "__main__":
    main()
