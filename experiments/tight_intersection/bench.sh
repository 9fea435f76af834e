#!/usr/bin/env bash
# Per-stage latency and pairs of every intersect mode with every blend, gsplat 1.5.3 in the
# same process, on biker at 1920x1080 and 3840x2160 (on the GPU machine, gsplat staged):
#   bash experiments/tight_intersection/bench.sh <biker.ply> <out dir>
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: bash $0 <biker.ply> <out dir>" >&2; exit 2; fi
PLY=$1 OUT=$2
mkdir -p "$OUT"
S=""
for blend in cuda cuda:gemm:precision=fp16 cuda:tcgs:precision=fp16; do
  for mode in aabb snugbox accutile; do S=$S${S:+,}$blend:intersect=$mode; done
done
for s in 1 2; do
  python -m gsexp.bench --ply "$PLY" --rasterizers "$S" --width $((1920 * s)) --height $((1080 * s)) \
      --frames 10 --json "$OUT/biker_${s}x.json"
done
