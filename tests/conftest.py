import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared() -> Path:
    """The read-only shared data folder ($GSEXP_SHARED, default <repo>/../shared)."""
    path = Path(os.environ.get("GSEXP_SHARED", REPO.parent / "shared"))
    if not (path / "data").is_dir():
        pytest.skip(f"shared data not found at {path}/data (set GSEXP_SHARED to the shared folder)")
    return path


@pytest.fixture(scope="session")
def biker(shared):
    """biker's Gaussians on the GPU and core_camera(g, width, height) (GPU tests only)."""
    from gsexp.bench.cameras import core_camera
    from gsexp.gaussians.ply import load_ply

    return load_ply(shared / "data/scenes/biker.compressed.ply").to("cuda"), core_camera


def require_cuda_toolchain() -> None:
    """Skip without the CUDA toolkit, except in CI (GSEXP_REQUIRE_CUDA_BUILD=1), where it fails."""
    from gsexp.render.cuda import CudaUnavailable, build

    try:
        build.check_toolchain()
    except CudaUnavailable as err:
        if os.environ.get("GSEXP_REQUIRE_CUDA_BUILD") == "1":
            raise
        pytest.skip(str(err))
