#!/usr/bin/env bash
# Render latency of every blend variant next to gsplat, on biker (orbit) at 1x, 2x and 3x of
# 1920x1080 and on a gsexp-trained lego (its test cameras) at 1x, 2x and 3x of 800x800.
#   bash experiments/tensor_core_blends/bench.sh <biker.ply> <lego run dir> <lego data> <out dir>
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: bash $0 <biker.ply> <lego run dir> <lego data dir> <out dir>" >&2
  exit 2
fi
PLY=$1 LEGO_RUN=$2 LEGO_DATA=$3 OUT=$4
mkdir -p "$OUT"
SPECS=cuda,cuda:gemm:precision=fp16,cuda:gemm:precision=tf32,cuda:tcgs:precision=fp16,cuda:tcgs:precision=tf32
SPECS=$SPECS,cuda:tcgs:precision=fp16:early_cull=false,cuda:tcgs:precision=fp16:g2l=false
SPECS=$SPECS,cuda:tcgs:precision=fp16:half_blend=true,cuda:tcgs:precision=fp16:batch=32,cuda:tcgs:precision=fp16:batch=64
for s in 1 2 3; do
  python -m gsexp.bench --ply "$PLY" --rasterizers "$SPECS" --width $((1920 * s)) --height $((1080 * s)) \
      --frames 10 --json "$OUT/biker_${s}x.json"
  python -m gsexp.bench --checkpoint "$LEGO_RUN" --cameras test --data-kind blender --data-path "$LEGO_DATA" \
      --scale "$s" --rasterizers "$SPECS" --frames 10 --json "$OUT/lego_${s}x.json"
done
