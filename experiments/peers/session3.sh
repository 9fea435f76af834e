#!/usr/bin/env bash
# The next GPU session of the peer study (issue 36) as one background job, staged as session2.sh:
#   carry .device:  source .device/env.sh; setsid nohup bash experiments/peers/session3.sh > /tmp/peers.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "all done"
#   then waits (MARK "all done"), then session.sh's three truth calls (carry .device_gt1, _gt2, _w).
# Lego round 3 of gsexp; from that lego the scale study's models; the per-stage profiles (the
# training step of gsexp and gsplat main at lego's size and 3 M, and a frame of tc_gs / vanilla /
# main / HiGS per kernel); the training step at 3 M and 6 M against main; then round 3 of the
# gsplat rows. ~16 min of device time, ~20 with the truth calls. Round 3 is the first after the
# extent / init fix (the extent from the training cameras alone, 3DGS's random init): its quality
# against rounds 1-2 is what the fix is worth; its speeds are side by side as before.
set -u
W=/tmp/peers; S=/tmp/scale; mkdir -p $W/profile_render
log() { echo "[$(date +%T)] $*" | tee -a $W/steps.log; }
export ROUND_LIST=${ROUND_LIST:-3} SKIP_TESTS=1
TRAINERS=gsexp bash experiments/peers/session.sh run
source .device/peer_whl/commits.env; export GSPLAT_COMMIT
mkdir -p $S/runs/base $S/models
cp "$(ls -t $W/runs/gsexp_r*/point_cloud.ply | head -n 1)" $S/runs/base/ && cp $S/runs/base/point_cloud.ply $S/models/lego_base.ply
main() { env PYTHONPATH=/tmp/peer_main:${PYTHONPATH:-} LEGO=/tmp/lego W=$S "$@"; }  # env: "$@" may begin with VAR=value
s=$(date +%s); main SIZES="" TRAIN_SIZES="3M 6M" bash experiments/scale/run.sh models > $W/models.log 2>&1
log "models rc=$? ($(( $(date +%s) - s )) s)"
s=$(date +%s); main PROFILE_SIZES="base 3M" bash experiments/scale/run.sh profile > $W/profile_train.log 2>&1
log "training-step profiles rc=$? ($(( $(date +%s) - s )) s)"
for m in base 3M; do
  s=$(date +%s); main python experiments/peers/profile_render.py --ply $S/models/lego_$m.ply --up z \
    --json $W/profile_render/lego_${m}_1920x1080.json > $W/profile_render/lego_$m.log 2>&1
  log "render profile lego $m rc=$? ($(( $(date +%s) - s )) s)"
done
s=$(date +%s); main SIZES="" TRAIN_SIZES="3M 6M" ROUNDS=2 bash experiments/scale/run.sh train > $W/step.log 2>&1
log "training step 3M/6M rc=$? ($(( $(date +%s) - s )) s)"
cp -r $S/profile $W/profile_train; cp -r $S/train $W/step
TRAINERS="main v153" bash experiments/peers/session.sh run
log "all done"
