#!/usr/bin/env bash
# One GPU call for the study: build csrc, the GPU tests of the intersect modes (and the
# rasterizer's, which every mode must keep passing), then bench.sh at 1x and 2x with gsplat.
#   bash experiments/tight_intersection/gpu_call.sh <biker.ply> <out dir>
# (on the GPU machine: python ../shared/tools/stage_gpu_job.py --peer here, biker copied into
#  .device/shared/data/scenes, carry .device, and start with
#  source .device/env.sh; export GSEXP_SHARED=$PWD/.device/shared)
set -uo pipefail
if [ $# -ne 2 ]; then echo "usage: bash $0 <biker.ply> <out dir>" >&2; exit 2; fi
PLY=$1 OUT=$2
mkdir -p "$OUT"
python -m gsexp.render.cuda.build > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
python -m pytest -q -s -p no:cacheprovider tests/test_cuda_intersect.py tests/test_cuda_rasterizer.py \
    > "$OUT/pytest.log" 2>&1
tail -2 "$OUT/pytest.log"; grep -E "^FAILED|^E  " "$OUT/pytest.log" | cut -c1-160 | head -20
bash experiments/tight_intersection/bench.sh "$PLY" "$OUT" > "$OUT/bench.log" 2>&1
python experiments/tensor_core_blends/tables.py "$OUT/biker_1x.json" "$OUT/biker_2x.json"
