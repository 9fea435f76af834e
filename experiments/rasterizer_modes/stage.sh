#!/usr/bin/env bash
# Stages issue 38's GPU session (session.sh) into .device_modes (~57 MiB with the checkout's 6):
# lego's train split + every 8th test view (lossless WebP), fern prepared here from its photos
# (gsexp.prepare, repeatable; images as WebP, the model as a tarball), the sources from
# before the modes (defaults_unchanged.sh), AlexNet's ImageNet weights (LPIPS) and gsexp's wheels;
# and .device_pyc (23 MiB): pycolmap, for fern's loader, and biker for the GPU tests, carried by
# session.sh's second call.
#   bash experiments/rasterizer_modes/stage.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=$(cd "${GSEXP_SHARED:-../shared}" && pwd)
S=.device_modes
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rm -rf $S
# stage_gpu_job.py writes .device/ in a git checkout's root: a scratch one, so .device here stays
(cd "$tmp" && git init -q . && python "$SHARED/tools/stage_gpu_job.py" --scene nerf_synthetic/lego --test-every 8 > /dev/null)
mkdir -p $S/shared/weights
sed 's#\.device/#.device_modes/#g' "$tmp/.device/env.sh" > $S/env.sh
cp -r "$tmp/.device/whl" $S/
python experiments/webp_stage.py pack "$tmp/.device/data/lego" $S/lego_webp
python -m gsexp.prepare "$SHARED/data/llff/fern/images_8" "$tmp/fern" --quiet > "$tmp/prepare.log"
python experiments/webp_stage.py pack "$tmp/fern" $S/fern_webp
tar czf $S/fern_rest.tgz -C "$tmp/fern" sparse prepare.json   # distorted/ is not trained on
S=$S bash experiments/rasterizer_modes/defaults_unchanged.sh stage > /dev/null
cp "$SHARED/weights/alexnet_features_imagenet.pth" $S/shared/weights/
rm -rf .device_pyc && mkdir -p .device_pyc/shared/data/scenes "$tmp/pyc" && unzip -q -d "$tmp/pyc" "$SHARED"/wheels/device-colmap/pycolmap-*.whl
tar cf - -C "$tmp/pyc" . | xz -9e > .device_pyc/pycolmap.tar.xz
cp "$SHARED/data/scenes/biker.compressed.ply" .device_pyc/shared/data/scenes/   # session.sh's PYTESTS
du -sh $S .device_pyc | cat
