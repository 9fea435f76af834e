#!/usr/bin/env bash
# The peers for the GPU machine: gsplat main (v1.6.0 at the commit below, its glm submodule
# pinned) and fused-ssim, as wheels for its Python 3.12 + torch 2.11 (CUDA 13.0), sm_90.
#   bash experiments/peers/build_wheels.sh sources DIR       # here: the three source trees (~9 MB)
#   bash experiments/peers/build_wheels.sh build SRC OUT     # build them (here or on the GPU machine)
#   bash experiments/peers/build_wheels.sh [OUT]             # both, here (default OUT .peer_wheels/)
# `sources` reads the fetched repositories in $MIRROR (the search tool's fetch). Building here needs
# a Python 3.12 with torch 2.11.0+cu130 ($PY, default /tmp/py312/bin/python) and nvcc 13.0; gsplat
# compiles ~70 CUDA files, hours on 2 busy cores, minutes on the GPU machine's 16.
set -euo pipefail
GSPLAT_COMMIT=90d7b4b349e379ccf9ee6a8cef76aa40f48bb32e      # nerfstudio-project/gsplat main, v1.6.0
GLM_COMMIT=2d4c4b4dd31fde06cfffad7915c2b3006402322f         # g-truc/glm, gsplat's submodule there
FUSED_SSIM_COMMIT=0ac916a05f48f8e477dc8ce1651a346b65ce2072  # rahul-goel/fused-ssim
MIRROR=${MIRROR:-/work/.mirror}

sources() {
  local dst=$1
  mkdir -p "$dst/gsplat/gsplat/cuda/csrc/third_party/glm" "$dst/fused-ssim"
  git -C "$MIRROR/nerfstudio-project+gsplat/repo" archive --format=tar $GSPLAT_COMMIT -- \
      gsplat setup.py config.yaml LICENSE pyproject.toml MANIFEST.in | tar -x -C "$dst/gsplat"
  git -C "$MIRROR/g-truc+glm/repo" archive --format=tar $GLM_COMMIT glm | tar -x -C "$dst/gsplat/gsplat/cuda/csrc/third_party/glm"
  git -C "$MIRROR/rahul-goel+fused-ssim/repo" archive --format=tar $FUSED_SSIM_COMMIT -- ':!images' ':!tests' |
      tar -x -C "$dst/fused-ssim"   # its benchmark charts and tests: 6 MB a GPU call need not carry
  printf 'GSPLAT_COMMIT=%s\nFUSED_SSIM_COMMIT=%s\nGLM_COMMIT=%s\n' $GSPLAT_COMMIT $FUSED_SSIM_COMMIT $GLM_COMMIT > "$dst/commits.env"
}

build() {
  local src=$1 out; out=$(realpath -m "$2"); mkdir -p "$out"
  local py=${PY:-python3}
  "$py" -c 'import sys, torch; assert sys.version_info[:2] == (3, 12) and torch.__version__.startswith("2.11") \
      and torch.version.cuda == "13.0", (sys.version, torch.__version__, torch.version.cuda)' || {
    echo "build_wheels.sh: needs Python 3.12 with torch 2.11.0+cu130 (PY=...; here e.g. python3.12 -m venv /tmp/py312;" \
         "/tmp/py312/bin/pip install torch==2.11.0 numpy ninja rich jaxtyping setuptools wheel)" >&2; exit 2; }
  export TORCH_CUDA_ARCH_LIST=9.0 CUDA_ARCHITECTURES=90 MAX_JOBS=${MAX_JOBS:-$(nproc)}
  # gsplat's own build switch: 3DGUT's forward kernels (with_ut=True, unused by 3DGS training or
  # rasterization()'s defaults) take over 20 min each in cicc here; the 3DGS kernels are the same
  export BUILD_3DGUT=${BUILD_3DGUT:-0}
  local inc; inc=$("$py" -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "include"))' 2>/dev/null)
  if [ -f "$inc/cusparse.h" ] && [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cusparse.h" ]; then
    export CPATH="$inc${CPATH:+:$CPATH}"   # a CUDA without cuSPARSE's headers (here): torch's wheel has them
  fi
  for pkg in fused-ssim gsplat; do
    echo "[$(date +%T)] building $pkg"
    (cd "$src/$pkg" && nice -n 10 "$py" -m pip wheel -q --no-build-isolation --no-deps -w "$out" .)
  done
  cp "$src/commits.env" "$out/"; echo "BUILD_3DGUT=$BUILD_3DGUT" >> "$out/commits.env"
  ls -la "$out"
}

case "${1:-}" in
  sources) sources "$2" ;;
  build) build "$2" "$3" ;;
  *) export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} PY=${PY:-/tmp/py312/bin/python}
     src=$(mktemp -d); trap 'rm -rf "$src"' EXIT
     sources "$src"; build "$src" "${1:-.peer_wheels}" ;;
esac
