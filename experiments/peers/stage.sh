#!/usr/bin/env bash
# Stages the peer study's GPU calls (experiments/peers/README.md, "Running it"):
#   bash experiments/peers/stage.sh train      # .device: lego's train split + every 8th test view
#                                              # (lossless WebP), the 200 test cameras, the wheels
#                                              # (gsexp's, gsplat main + fused-ssim, gsplat 1.5.3)
#   bash experiments/peers/stage.sh truth      # .device_gt1, .device_gt2: lego's 200 test images
#                                              # in two halves (~29 MiB each), one per later call;
#                                              # LPIPS's backbones: AlexNet in gt2, VGG in .device_w
#   bash experiments/peers/stage.sh real       # .device_real: beer, fern, pycolmap, gsplat main (session_real.sh)
# The peers' wheels come from build_wheels.sh (PEER_WHEELS, default .peer_wheels/).
set -euo pipefail
cd "$(dirname "$0")/../.."
LEGO=${GSEXP_SHARED:-../shared}/data/nerf_synthetic/lego
PEER_WHEELS=${PEER_WHEELS:-.peer_wheels}
case "${1:-}" in
train)
  if [ -e .device ]; then echo "stage.sh: .device exists: move it aside (or remove it) first" >&2; exit 1; fi
  python ../shared/tools/stage_gpu_job.py --scene nerf_synthetic/lego --test-every 8 > /dev/null
  python experiments/webp_stage.py pack .device/data/lego .device/lego_webp
  rm -rf .device/data      # PNGs packed. The joblib launcher's wheel stays: jobs_per_gpu.sh sweeps, and
                           # without it Hydra warns at every start that the gpus launcher cannot load
  mkdir -p .device/peer_whl
  cp ../shared/wheels/device-peer/gsplat-1.5.3-*.whl .device/peer_whl/
  if ls "$PEER_WHEELS"/gsplat-1.6.0-*.whl "$PEER_WHEELS"/fused_ssim-*.whl >/dev/null 2>&1; then
    cp "$PEER_WHEELS"/gsplat-1.6.0-*.whl "$PEER_WHEELS"/fused_ssim-*.whl "$PEER_WHEELS"/commits.env .device/peer_whl/
  else  # no wheels built here: the sources go, and session.sh builds them there (minutes of device time)
    echo "stage.sh: no peer wheels in $PEER_WHEELS: staging the sources (build_wheels.sh builds them on the GPU machine)" >&2
    src=$(mktemp -d); bash experiments/peers/build_wheels.sh sources "$src"
    cp "$src"/commits.env .device/peer_whl/; tar czf .device/peer_src.tgz -C "$src" .; rm -rf "$src"
  fi
  python experiments/peers/cameras.py blender "$LEGO" > .device/lego_test_cameras.json
  cp ${GSEXP_SHARED:-../shared}/data/scenes/biker.compressed.ply .device/   # render_session.sh
  ;;
truth)
  for half in 1 2; do
    dst=.device_gt$half; rm -rf "$dst" /tmp/gt_half; mkdir -p /tmp/gt_half/test
    python - "$LEGO" "$half" <<'PY'
import json, shutil, sys
from pathlib import Path
lego, half = Path(sys.argv[1]), int(sys.argv[2])
meta = json.loads((lego / "transforms_test.json").read_text())
for frame in meta["frames"][(half - 1) * 100:half * 100]:
    shutil.copy(lego / (frame["file_path"] + ".png"), "/tmp/gt_half/test/")
if half == 1:
    shutil.copy(lego / "transforms_test.json", "/tmp/gt_half/")
PY
    python experiments/webp_stage.py pack /tmp/gt_half "$dst"
  done
  rm -rf /tmp/gt_half
  # LPIPS's ImageNet backbones for score.py (no downloads there): AlexNet rides with the second
  # half, VGG (56 MiB) needs a call of its own
  W8=${GSEXP_SHARED:-../shared}/weights
  mkdir -p .device_gt2/weights && cp "$W8"/alexnet_features_imagenet.pth .device_gt2/weights/
  rm -rf .device_w && mkdir -p .device_w && cp "$W8"/vgg16_features_imagenet.pth .device_w/
  ;;
real)  # .device_real for session_real.sh: beer and fern's photos, pycolmap (as tar.xz), gsexp's
       # wheels, gsplat main + fused-ssim; LPIPS's AlexNet comes with .device_gt2 (stage.sh truth):
       # with it here, .device_real and the checkout passed the 64 MiB a call carries (2026-12-07f)
  dst=.device_real; rm -rf "$dst" && mkdir -p "$dst"/whl "$dst"/peer_whl "$dst"/data
  cp ../shared/wheels/device/*.whl "$dst"/whl/
  sed 's#\.device/#.device_real/#g' .device/env.sh > "$dst"/env.sh 2>/dev/null ||
    { echo "stage.sh real: stage .device first (bash experiments/peers/stage.sh train): its env.sh is reused" >&2; exit 1; }
  cp "$PEER_WHEELS"/gsplat-1.6.0-*.whl "$PEER_WHEELS"/fused_ssim-*.whl "$PEER_WHEELS"/commits.env "$dst"/peer_whl/ 2>/dev/null ||
    echo "stage.sh real: no peer wheels in $PEER_WHEELS: gsexp's study only (run session_real.sh with PEER_RUNS=\"\")" >&2
  rm -rf /tmp/pycolmap_u && mkdir /tmp/pycolmap_u && unzip -q -d /tmp/pycolmap_u ../shared/wheels/device-colmap/pycolmap-*.whl
  tar cf - -C /tmp/pycolmap_u . | xz -9e > "$dst"/pycolmap.tar.xz && rm -rf /tmp/pycolmap_u
  cp -r ../shared/data/colmap/beer ../shared/data/llff/fern "$dst"/data/
  ;;
*) echo "usage: bash experiments/peers/stage.sh train|truth|real" >&2; exit 2 ;;
esac
du -sh .device* | cat
