"""csrc/preprocess.cu's kernels built for the CPU (tests/preprocess_host.cpp: a block's threads as
std::threads meeting at a barrier), at every SH degree and in both SH layouts, and antialiased (Mip-Splatting's
opacity compensation) at two of them, and with Mip-Splatting's 0.1 px^2 dilation (rasterizer.dilation)
with and without it: the outputs and gradients agree with the torch reference
in float64 (in the joined layout with a gradient for the depths too, rasterizer.depth's dL/dz,
which only the means receive), and the backward, which moves a block's SH
rows through shared memory, writes every gradient itself (zeros where culled or unused).

Runs in CI with the CUDA headers (GSEXP_REQUIRE_CUDA_BUILD=1 fails instead of skipping); the GPU
check of the backward is tests/test_cuda_preprocess_backward.py."""
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import require_cuda_toolchain
from gsexp.render.cuda.function import camera_values
from gsexp.render.reference.preprocess import preprocess
from gsexp.render.reference.tiles import duplicate
from render_helpers import culled_runs, random_scene, rel_error

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"degree (\d) (split|joined)( antialiased)? dilation ([\d.]+): visible (\d+) of (\d+)")
CASES = 12  # 4 degrees x 2 layouts, then 2 antialiased, then 2 with dilation 0.1
N = 8000


def cuda_include() -> Path:
    require_cuda_toolchain()
    from torch.utils import cpp_extension

    return Path(cpp_extension.CUDA_HOME) / "include"


def mixed_scene():
    """Random Gaussians (16 SH bases) with runs behind the camera (render_helpers.culled_runs),
    and the blend's gradients for the backward."""
    g, cam = random_scene(5, N, 400, 300, 3)
    gen = torch.Generator().manual_seed(6)
    upstream = {k: torch.randn(N, d, generator=gen) for k, d in (("means2d", 2), ("conics", 3), ("colors", 3),
                                                                  ("opacities", 1), ("depths", 1))}
    return culled_runs(g, cam), cam, upstream


def run_host(tmp_path, g, cam, upstream, contract: str = "-ffp-contract=off") -> tuple[str, np.ndarray]:
    """contract: how g++ may fuse a*b+c (off: each rounded, as the reference; "-ffp-contract=fast
    -mfma": into FMAs, as nvcc does by default)."""
    exe = tmp_path / "preprocess_host"
    subprocess.run(["g++", "-std=c++20", "-O2", *contract.split(), "-pthread", "-w", "-I", str(REPO / "csrc"),
                    "-I", str(cuda_include()), str(REPO / "tests/preprocess_host.cpp"), "-o", str(exe)], check=True)
    arrays = [g.means, g.log_scales, g.quats, g.opacity_logits, g.sh, *upstream.values()]
    with open(tmp_path / "in.bin", "wb") as f:
        f.write(np.int32(N).tobytes() + np.asarray(camera_values(cam), np.float32).tobytes())
        for a in arrays:
            f.write(a.detach().numpy().astype(np.float32).tobytes())
    proc = subprocess.run([str(exe), tmp_path / "in.bin", tmp_path / "out.bin"], capture_output=True, text=True,
                          timeout=600)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, np.fromfile(tmp_path / "out.bin", dtype=np.uint8)


# Per case, the kernels' outputs in preprocess_host.cpp's order: (name, columns, dtype).
FIELDS = [("means2d", 2, np.float32), ("conic_opacity", 4, np.float32), ("colors", 3, np.float32),
          ("depths", 1, np.float32), ("radii", 1, np.int32), ("touched", 1, np.int32), ("means", 3, np.float32),
          ("log_scales", 3, np.float32), ("quats", 4, np.float32), ("opacity_logits", 1, np.float32),
          ("sh", 48, np.float32)]


def cases(raw: np.ndarray) -> list[dict]:
    out, at = [], 0
    for _ in range(CASES):
        case = {}
        for name, cols, dtype in FIELDS:
            size = N * cols * 4
            case[name] = torch.from_numpy(raw[at:at + size].view(dtype).reshape(N, cols).copy())
            at += size
        out.append(case)
    assert at == raw.size
    return out


def test_kernels_on_the_cpu(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    g, cam, upstream = mixed_scene()
    stdout, raw = run_host(tmp_path, g, cam, upstream)
    lines = [LINE.fullmatch(line) for line in stdout.splitlines()]
    assert len(lines) == CASES and all(lines), stdout
    outputs = cases(raw)
    seen = set()
    for m, ours in zip(lines, outputs):
        degree, layout, aa, dilation, visible, n = m.groups()
        degree, aa, dilation = int(degree), aa is not None, float(dilation)
        assert 0.3 < int(visible) / int(n) < 0.7, m.group(0)  # culled and visible Gaussians, in runs
        seen.add((degree, layout, aa, dilation))
        culled = ours["radii"][:, 0] == 0
        for name in ("means2d", "conic_opacity", "colors", "depths"):  # every output written
            assert torch.isfinite(ours[name]).all(), (degree, layout, name)
        for name in ("means", "log_scales", "quats", "sh"):  # every gradient written, zeros where culled
            assert torch.isfinite(ours[name]).all() and not ours[name][culled].any(), (degree, layout, name)

        # against the float64 reference, on the Gaussians both keep
        leaves = g.map(lambda t: t.detach().double().requires_grad_())
        ref = preprocess(leaves, cam, sh_degree=degree, intersect="accutile", antialiased=aa, dilation=dilation)
        radii = ours["radii"][:, 0]
        assert (radii == ref.radii).float().mean() > 0.999, degree
        both = (radii > 0) & (ref.radii > 0)
        assert both.sum() > 1000
        assert (ours["means2d"][both] - ref.means2d[both]).abs().max() < 1e-3
        assert rel_error(ours["conic_opacity"][both, :3], ref.conics[both].detach()) < 1e-5  # seen: 3e-7
        assert rel_error(ours["conic_opacity"][both, 3], ref.opacities[both].detach()) < 1e-5
        assert rel_error(ours["colors"][both], ref.colors[both].detach()) < 1e-6  # seen: <1e-7
        assert rel_error(ours["depths"][both, 0], ref.depths[both].detach()) < 1e-6
        # accutile's tiles per Gaussian (csrc/intersect.cuh), as the reference's pairs
        pairs = torch.bincount(duplicate(ref)[0], minlength=N)
        assert torch.equal(torch.where(radii > 0, ours["touched"][:, 0], 0).long(), pairs), (degree, layout, aa)
        terms = [k for k in upstream if k != "depths" or layout == "joined"]  # preprocess_host.cpp: dL/dz there
        loss = sum((upstream[k][both].double() * getattr(ref, k)[both].reshape(-1, upstream[k].shape[1])).sum()
                   for k in terms)
        names = ["means", "log_scales", "quats", "opacity_logits", "sh"]  # seen: relative errors < 1e-6
        grads = torch.autograd.grad(loss, [getattr(leaves, k) for k in names])
        for name, theirs in zip(names, grads):
            mine = ours[name].reshape(theirs.shape)
            assert rel_error(mine[both], theirs[both]) < 1e-5, (degree, layout, name, rel_error(mine[both], theirs[both]))
        used = (degree + 1) ** 2
        assert not ours["sh"].view(N, 16, 3)[:, used:].any()
    assert seen == {(d, layout, False, 0.3) for d in range(4) for layout in ("split", "joined")} | {
        (1, "split", True, 0.3), (3, "joined", True, 0.3), (2, "split", False, 0.1), (3, "joined", True, 0.1)}
