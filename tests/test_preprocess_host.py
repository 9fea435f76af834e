"""csrc/preprocess.cu's kernels built for the CPU (tests/preprocess_host.cpp: a block's threads as
std::threads meeting at a barrier): the staged kernels, which move SH rows through shared memory,
give the unstaged kernels' outputs and gradients bit for bit, writing every value themselves.

Runs in CI with the CUDA headers (GSEXP_REQUIRE_CUDA_BUILD=1 fails instead of skipping); the GPU
check of the same is tests/test_cuda_staged_preprocess.py."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require_cuda_toolchain

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"degree (\d) (split|joined): forward_equal (\d) backward_equal (\d) visible (\d+) of (\d+) "
                  r"staged_blocks (\d+) direct_visible (\d+) sh_grad_abs ([\d.]+)")


def cuda_include() -> Path:
    require_cuda_toolchain()
    from torch.utils import cpp_extension

    return Path(cpp_extension.CUDA_HOME) / "include"


def test_staged_kernels_equal_the_unstaged_ones_on_the_cpu(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    exe = tmp_path / "preprocess_host"
    subprocess.run(["g++", "-std=c++20", "-O2", "-ffp-contract=off", "-pthread", "-w", "-I", str(REPO / "csrc"),
                    "-I", str(cuda_include()), str(REPO / "tests/preprocess_host.cpp"), "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    print(proc.stdout)
    cases = [LINE.fullmatch(line) for line in proc.stdout.splitlines()]
    assert len(cases) == 8 and all(cases), proc.stdout + proc.stderr
    seen = set()
    for m in cases:
        degree, layout, fwd, bwd, visible, n, staged_blocks, direct_visible, sh_abs = m.groups()
        assert fwd == "1" and bwd == "1", m.group(0)
        # the scene exercises both forward paths with visible Gaussians, and culled ones in between
        assert 0.3 < int(visible) / int(n) < 0.7 and int(staged_blocks) > 10 and int(direct_visible) > 100, m.group(0)
        assert float(sh_abs) > 0, m.group(0)
        seen.add((int(degree), layout))
    assert seen == {(d, layout) for d in range(4) for layout in ("split", "joined")}
    assert proc.returncode == 0
