#!/usr/bin/env bash
# One GPU session for issue 23's scaling study (experiments/scale/run.sh: base, models, render,
# train, collect). Staged here with `bash experiments/scale/stage_scale.sh` (45 MiB in .device: lego as
# WebP, the wheels with gsplat's; no LPIPS weights: the base run skips LPIPS, which the study
# does not use).
# On the GPU machine (the machine goes 30 s after a call: chain the calls with no gap):
#   source .device/env.sh; mkdir -p /tmp/sc; setsid nohup bash experiments/scale/h200_scale_session.sh > /tmp/sc/job.log 2>&1 < /dev/null &
#   bash experiments/scale/h200_scale_session.sh collect 570     # then again until "done"; packs $OUT/scale.tgz
# run.sh skips what an earlier call finished, so the script can be started again.
set -u
L=/tmp/sc; mkdir -p $L
log() { echo "[$(date +%T)] $*" | tee -a $L/steps.log; }
if [ "${1:-}" = collect ]; then
  for _ in $(seq "${2:-0}"); do grep -q "] done" $L/steps.log 2>/dev/null && break; sleep 1; done
  cat $L/steps.log
  env -u OUT bash experiments/scale/run.sh collect > $L/collect.log 2>&1 || echo "collect rc=$?"
  mkdir -p "$OUT" && tar czf "$OUT"/scale.tgz -C /tmp scale/render scale/train scale/profile scale/summary sc 2>/dev/null; ls -la "$OUT"
  exit 0
fi
log start
[ -d /tmp/lego ] || python experiments/webp_stage.py unpack .device/lego_webp /tmp/lego > $L/unpack.log 2>&1
python -c "from gsexp.render.cuda import build; build.load()" > $L/build.log 2>&1; log "build rc=$?"
export LEGO=/tmp/lego
# the checks owed from the CPU side (by default the pair limit in csrc/ext.cpp and settled_overflows()),
# beside the untimed steps that make the models; every timed step waits for them
(timeout 300 python -m pytest -q ${CHECKS:-tests/test_pairs.py tests/test_cuda_intersect.py} > $L/checks.log 2>&1
 log "checks rc=$? $(tail -1 $L/checks.log)") &
for step in ${STEPS:-base models render train profile}; do  # e.g. STEPS="base models train profile" SIZES=""
  case $step in base|models) ;; *) wait ;; esac
  s=$(date +%s); bash experiments/scale/run.sh $step > $L/$step.log 2>&1; log "$step rc=$? ($(( $(date +%s) - s )) s)"
done
wait
log done
