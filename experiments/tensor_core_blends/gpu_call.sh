#!/usr/bin/env bash
# One GPU call for the study: build csrc, run the GPU tests, bench biker at 1x, 2x and 3x of
# 1920x1080 with every variant and gsplat, then Nsight Compute on the blend kernels.
#   bash experiments/tensor_core_blends/gpu_call.sh <biker.ply> <out dir>
# (on the GPU machine: source .device/env.sh first; see ../vanilla_cuda/README.md for staging)
set -uo pipefail
if [ $# -ne 2 ]; then echo "usage: bash $0 <biker.ply> <out dir>" >&2; exit 2; fi
PLY=$1 OUT=$2
mkdir -p "$OUT"
python -m gsexp.render.cuda.build > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
python -m pytest -q -s -p no:cacheprovider tests/test_cuda_build.py tests/test_cuda_matrix_blends.py \
    tests/test_cuda_rasterizer.py > "$OUT/pytest.log" 2>&1
tail -2 "$OUT/pytest.log"
S=cuda,cuda:gemm:precision=fp16,cuda:gemm:precision=tf32,cuda:gemm:precision=fp32
S=$S,cuda:tcgs:precision=fp16,cuda:tcgs:precision=tf32,cuda:tcgs:precision=fp32
S=$S,cuda:tcgs:precision=fp16:early_cull=false,cuda:tcgs:precision=fp16:g2l=false
S=$S,cuda:tcgs:precision=fp16:batch=32,cuda:tcgs:precision=fp16:batch=64,cuda:tcgs:precision=fp16:half_blend=true
for s in 1 2 3; do
  python -m gsexp.bench --ply "$PLY" --rasterizers "$S" --width $((1920 * s)) --height $((1080 * s)) \
      --frames 10 --json "$OUT/biker_${s}x.json" > "$OUT/biker_${s}x.txt" 2>&1
  tail -17 "$OUT/biker_${s}x.txt"
done
timeout 150 ncu --clock-control none -k regex:blend --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SourceCounters -o "$OUT/blend" \
    python experiments/tensor_core_blends/ncu_blend.py --ply "$PLY" \
    --rasterizers cuda,cuda:gemm:precision=fp16,cuda:tcgs:precision=fp16 > "$OUT/ncu_run.txt" 2>&1
ncu --import "$OUT/blend.ncu-rep" --page details > "$OUT/ncu.txt" 2>&1
