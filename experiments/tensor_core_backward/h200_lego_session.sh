#!/usr/bin/env bash
# One GPU session on lego: the GEMM-backward tests, a lego trained with experiment=lego_fast,
# issue 22's viewer overhead on it and its PLY for the screenshot. Staged here with
#   python ../shared/tools/stage_gpu_job.py --scene nerf_synthetic/lego --test-every 8
#   mv .device/data /tmp/staged && python experiments/webp_stage.py pack /tmp/staged/lego .device/lego_webp
#   mkdir -p .device/shared/data/scenes && cp ../shared/data/scenes/biker.compressed.ply .device/shared/data/scenes/
#   pip download viser==1.1.1 --python-version 3.12 --only-binary=:all: -d /tmp/vw   # the viewer's wheels the
#   cp /tmp/vw/{viser,msgspec,websockets,trimesh,zstandard}-*.whl .device/whl/      # GPU image lacks
# (51 MiB; no LPIPS weights: the base run's LPIPS is skipped.)
# On the GPU machine (the machine goes 30 s after a call: chain the calls with no gap):
#   source .device/env.sh; mkdir -p /tmp/gs; setsid nohup bash experiments/tensor_core_backward/h200_lego_session.sh > /tmp/gs/job.log 2>&1 < /dev/null &
#   bash experiments/tensor_core_backward/h200_lego_session.sh collect 570     # waits for "done" (at most 570 s), packs results into $OUT
set -u
W=/tmp/gs; mkdir -p $W
export GSEXP_SHARED=$PWD/.device/shared
log() { echo "[$(date +%T)] $*" | tee -a $W/steps.log; }
if [ "${1:-}" = collect ]; then
  for _ in $(seq "${2:-0}"); do grep -q "] done" $W/steps.log 2>/dev/null && break; sleep 1; done
  cat $W/steps.log
  # a call brings back at most 8 files: the small ones in one archive, the PLY in 15 MB parts
  cp /tmp/scale/runs/base/results.json $W/base_results.json 2>/dev/null
  mkdir -p "$OUT" && tar -C /tmp --exclude='*.pt' --exclude='*.ply' --exclude=ply -czf "$OUT"/gs.tgz gs
  [ -d $W/ply ] && cp $W/ply/* "$OUT"/
  exit 0
fi
log start
[ -d /tmp/lego ] || python experiments/webp_stage.py unpack .device/lego_webp /tmp/lego > $W/unpack.log 2>&1
python -c "from gsexp.render.cuda import build; build.load()" > $W/build.log 2>&1; log "build rc=$?"
# the whole GEMM-backward file: its probe test's refusal of an unknown id has not run on a GPU yet
timeout 300 python -m pytest -q tests/test_cuda_gemm_backward.py > $W/gpu_tests.log 2>&1
log "gpu tests rc=$? ($(tail -n 1 $W/gpu_tests.log))"
BASE=/tmp/scale/runs/base   # experiments/scale/run.sh's base: lego 30K with experiment=lego_fast
LEGO=/tmp/lego bash experiments/scale/run.sh base > $W/base.log 2>&1; log "base rc=$?"
# issue 20's bench and ncu ran on 2026-12-04 (experiments/tensor_core_backward/README.md):
#   python experiments/tensor_core_backward/bench.py --lego $BASE --rounds 5 --modes exact,gemm_tf32,...
# 8 rounds: the 4 of the first measure overlapped (block-to-block spread ~0.2 ms at a 1.8 ms step)
python experiments/viewer/overhead.py $BASE --steps 1000 --rounds 8 --json $W/overhead.json > $W/overhead.log 2>&1
log "issue 22 overhead rc=$?"
# the model for issue 22's screenshot, taken on the CPU machine (cat the parts back together):
# compressed (~60 B a Gaussian against 248), since a call brings back 64 MiB at most
mkdir -p $W/ply && python -m gsexp.export $BASE --out /tmp/lego_fast.compressed.ply > $W/export.log 2>&1 &&
  split -b 15m /tmp/lego_fast.compressed.ply $W/ply/lego_fast.compressed.ply.part_; log "issue 22 ply rc=$?"
# issue 23's scale study (experiments/scale/run.sh) needs the peer and the LPIPS weights, which do
# not fit beside viser's wheels: it runs from a carry of its own.
log done
