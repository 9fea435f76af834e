"""JIT build of csrc/ with torch.utils.cpp_extension + ninja, compiled on first use and cached.

Build ahead of time (e.g. in a Docker image or before a sweep) with
    python -m gsexp.render.cuda.build
The cache lives in $GSEXP_BUILD_DIR, default ~/.cache/gsexp/build/<torch>-<cuda>; ninja
rebuilds only what changed.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

CSRC = Path(__file__).resolve().parents[3] / "csrc"
SOURCES = ("ext.cpp", "preprocess.cu", "binning.cu", "blend_vanilla.cu", "blend_matrix.cu", "backward.cu",
           "backward_gemm.cu", "ssim.cu", "adam.cu", "densify.cu", "pose.cu",
           "bilateral.cu")
# Same flags for every variant: sm_90a code (Hopper) plus compute_90 PTX for newer GPUs.
NVCC_FLAGS = ["-O3", "--use_fast_math", "-lineinfo",
              "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_90,code=compute_90"]
CUDA_HOME_GUESSES = ("/usr/local/cuda",)  # tried after $CUDA_HOME, $CUDA_PATH and torch's guess
FALLBACK = "use rasterizer=torch (render(..., backend='torch')) to run without CUDA"

_module = None


class CudaUnavailable(RuntimeError):
    pass


def arch_flags() -> list[str]:
    """Add SASS for a present GPU that is not Hopper (the PTX above cannot run below sm_90)."""
    flags = []
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        if major != 9:
            flags.append(f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}")
    return flags


def build_dir() -> Path:
    default = Path.home() / ".cache" / "gsexp" / "build" / f"torch{torch.__version__}-cuda{torch.version.cuda}"
    path = Path(os.environ.get("GSEXP_BUILD_DIR", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_toolchain() -> None:
    """Fail early, saying what is missing; point torch at a complete toolkit."""
    import torch.utils.cpp_extension as cpp

    if torch.version.cuda is None:
        raise CudaUnavailable(f"the CUDA rasterizer needs a CUDA build of torch; this is {torch.__version__} "
                              f"(CPU only). Install a CUDA build, or {FALLBACK}.")
    # torch guesses CUDA_HOME from `which nvcc`, which can be a wrapper outside the toolkit.
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), cpp.CUDA_HOME, *CUDA_HOME_GUESSES):
        if home and (Path(home) / "bin" / "nvcc").exists() and (Path(home) / "include" / "cuda_runtime.h").exists():
            cpp.CUDA_HOME = home
            return
    raise CudaUnavailable(f"the CUDA rasterizer compiles csrc/ on first use and needs the CUDA toolkit (nvcc and "
                          f"headers), which was not found: set CUDA_HOME, e.g. CUDA_HOME=/usr/local/cuda. "
                          f"Or {FALLBACK}.")


def load(verbose: bool = False):
    """The compiled extension module (built on the first call, then loaded from the cache)."""
    global _module
    if _module is None:
        check_toolchain()
        from torch.utils.cpp_extension import load as load_extension

        _module = load_extension(
            name="gsexp_csrc",
            sources=[str(CSRC / s) for s in SOURCES],
            extra_cflags=["-O3"],
            extra_cuda_cflags=NVCC_FLAGS + arch_flags(),
            extra_include_paths=[str(CSRC)],
            build_directory=str(build_dir()),
            verbose=verbose,
        )
    return _module


def main(argv=None) -> int:
    """Build (or find in the cache) the extension; --help says so without building."""
    import argparse
    import sys
    import time

    parser = argparse.ArgumentParser(prog="python -m gsexp.render.cuda.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    start = time.perf_counter()
    try:
        ext = load(verbose=True)
    except CudaUnavailable as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    print(f"built {ext.__file__} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
