#!/usr/bin/env bash
# One GPU session on lego for the studies that start from a trained lego model: issue 20's
# backward bench and ncu profile, issue 22's viewer overhead and the PLY for its screenshot, issue 23's scale study.
# Staged here with
#   python ../shared/tools/stage_gpu_job.py --peer --scene nerf_synthetic/lego --test-every 8
#   mv .device/data /tmp/staged && python tools/webp_stage.py pack /tmp/staged/lego .device/lego_webp
#   cp ../shared/tools/peer_train_gsplat.py .device/; mkdir -p .device/shared/weights .device/shared/data/scenes
#   cp ../shared/weights/alexnet_features_imagenet.pth .device/shared/weights/
#   cp ../shared/data/scenes/biker.compressed.ply .device/shared/data/scenes/
# On the GPU machine (the machine goes 30 s after a call: chain the calls with no gap):
#   source .device/env.sh; setsid nohup bash tools/h200_lego_session.sh > /tmp/gs/job.log 2>&1 < /dev/null &
#   sleep 540; bash tools/h200_lego_session.sh collect        # then: sleep N; bash ... collect
# Steps run in order of the issues and skip what is done; collect copies results to $OUT.
set -u
W=/tmp/gs; mkdir -p $W
export GSEXP_SHARED=$PWD/.device/shared
log() { echo "[$(date +%T)] $*" | tee -a $W/steps.log; }
if [ "${1:-}" = collect ]; then
  cat $W/steps.log
  mkdir -p "$OUT" && tar -C /tmp --exclude='*.pt' --exclude='*.ply' --exclude=renders -czf "$OUT"/gs.tgz gs
  [ -d $W/ply ] && cp $W/ply/* "$OUT"/
  exit 0
fi
log start
[ -d /tmp/lego ] || python tools/webp_stage.py unpack .device/lego_webp /tmp/lego > $W/unpack.log 2>&1
python -c "from gsexp.render.cuda import build; build.load()" > $W/build.log 2>&1; log "build rc=$?"
# the tf32 rounding (cvt.rn since 2026-12-03) against its emulation, before anything is timed
timeout 600 python -m pytest -q tests/test_cuda_gemm_backward.py tests/test_cuda_matrix_blends.py tests/test_precision.py \
  > $W/gpu_tests.log 2>&1; log "gpu tests rc=$? ($(tail -n 1 $W/gpu_tests.log))"
BASE=/tmp/scale/runs/base   # experiments/scale/run.sh's base: lego 30K with experiment=lego_fast
LEGO=/tmp/lego LPIPS_NET=alex bash experiments/scale/run.sh base > $W/base.log 2>&1; log "base rc=$?"
python experiments/tensor_core_backward/bench.py --lego $BASE --rounds 6 --out $W/bench_backward.json \
  > $W/bench_backward.log 2>&1; log "issue 20 bench rc=$?"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
if [ -n "$NCU" ]; then  # where the backward's time goes (counters read only on Firecracker machines)
  timeout 300 "$NCU" --clock-control none --profile-from-start off --kernel-name regex:blend_backward \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --csv --page raw \
    python experiments/tensor_core_backward/ncu_profile.py run --lego $BASE --order $W/ncu_order.json \
    > $W/ncu_backward.csv 2> $W/ncu_backward.err; log "issue 20 ncu rc=$?"
  python experiments/tensor_core_backward/ncu_profile.py summary $W/ncu_backward.csv $W/ncu_order.json \
    > $W/ncu_summary.md 2>&1; log "issue 20 ncu summary rc=$?"
else log "issue 20 ncu: not found"; fi
python experiments/viewer/overhead.py $BASE --steps 1000 --rounds 4 --json $W/overhead.json > $W/overhead.log 2>&1
log "issue 22 overhead rc=$?"
mkdir -p $W/ply && split -b 15m $BASE/point_cloud.ply $W/ply/lego_fast.ply.part_; log "issue 22 ply split"
LEGO=/tmp/lego OUT=$W bash experiments/scale/run.sh models render train collect > $W/scale.log 2>&1
log "issue 23 scale rc=$?"
log done
