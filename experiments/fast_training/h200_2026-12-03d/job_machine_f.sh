#!/bin/bash
# Short session: build this tree, then lego_fast runs fast / vanilla_fast / fast, results to $OUT after each.
set -u
R=$PWD; F=/tmp/ft; mkdir -p $F $OUT
export GSEXP_SHARED=$R/.device/shared GSEXP_BUILD_DIR=/tmp/bnew
log() { echo "[$(date +%T)] $*" | tee -a $F/steps.log; }
log start
python tools/webp_stage.py unpack .device/lego_webp /tmp/lego > $F/unpack.log 2>&1 &
python -c "from gsexp.render.cuda import build; build.load()" > $F/build.log 2>&1; log "build rc=$?"
wait
n=0
for c in fast vanilla_fast fast; do
  n=$((n+1))
  python experiments/fast_training/run.py --data /tmp/lego --set lpips_net=alex --out $F/s2_$n --configs $c > $F/s2_$n.log 2>&1
  log "run $n $c rc=$?"
  python -c "
import json; r=json.load(open('$F/s2_$n/results.json'))['rows'][0]
print('RESULT', $n, r['config'], r['train_seconds'], r['psnr'], r['ssim'], r['lpips'], r['num_gaussians'], r['peak_memory_mb'], r['phase_ms'])" >> $F/steps.log 2>&1
  cp $F/steps.log $OUT/; cp $F/s2_$n/results.json $OUT/results_s2_$n.json 2>/dev/null
done
