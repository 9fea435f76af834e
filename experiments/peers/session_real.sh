#!/usr/bin/env bash
# Issue 36's real captures, then issue 41's study, as one background job on the GPU machine.
# Staged here with `bash experiments/peers/stage.sh real` (.device_real, 55 MiB). Calls, chained:
#   carry .device_real: source .device_real/env.sh; setsid nohup bash experiments/peers/session_real.sh > /tmp/real.log 2>&1 < /dev/null & bash experiments/peers/session_real.sh wait 560
#   then, carrying nothing: source .device_real/env.sh; bash experiments/peers/session_real.sh wait 580   # until "all done"
# 1. beer and fern prepared from their photos (gsexp.prepare), one round each, alternating:
#    gsexp (tc_gs + accutile, lego_fast's step settings) then gsplat main + fused-ssim through
#    train_gsplat.py on the same loaded data; both render the test views to 8-bit PNGs and score.py
#    scores every folder the same way (LPIPS on AlexNet: VGG does not fit in the call).
# 2. issues 41 and 40 on beer: FEATS (appearance, pose, bilateral grid; capture_turbo's recipes) x two seeds, as long as
#    the session lasts (run.sh skips finished runs, so a later session goes on from where it stopped).
# ~12 min for part 1 (builds 2, prepare 1, four runs ~8), then ~80 s per study run.
set -u
S=.device_real; P=/tmp/peers_real; RC=/tmp/real_captures; mkdir -p $P/renders $P/scores $P/runs
log() { echo "[$(date +%T)] $*" | tee -a $P/steps.log; }
pack() { mkdir -p "$OUT"; cp $P/steps.log "$OUT"/ 2>/dev/null
  OUT=$P/out bash experiments/real_captures/run.sh collect > /dev/null 2>&1
  tar czf "$OUT"/real.tgz -C /tmp --exclude='*.png' --exclude='*.pt' --exclude='*.ply' peers_real; }
if [ "${1:-}" = wait ]; then
  for _ in $(seq "${2:-0}"); do grep -q "] ${3:-all done}" $P/steps.log 2>/dev/null && break; sleep 1; done
  cat $P/steps.log; pack; exit 0
fi
export D=$S/data W=$RC GSEXP_SHARED=$PWD/$S/shared EXTRA="log_every=100 pair_capacity=true lpips_net=alex"
RUN="bash experiments/real_captures/run.sh"
log start
tar xJf $S/pycolmap.tar.xz -C /tmp/site; log "pycolmap rc=$?"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peer_main $S/peer_whl/gsplat-1.6.0-*.whl \
  $S/peer_whl/fused_ssim-*.whl > $P/pip_main.log 2>&1; log "gsplat main install rc=$?"
python -c "from gsexp.render.cuda import build; build.load()" > $P/build.log 2>&1; log "gsexp build rc=$?"
DATAS="beer_prepared fern_prepared" $RUN scenes > $P/scenes.log 2>&1; log "prepare beer, fern rc=$?"
source $S/peer_whl/commits.env; export GSPLAT_COMMIT FUSED_SSIM_COMMIT
for data in beer_prepared fern_prepared; do
  scene=$RC/$data
  python experiments/peers/cameras.py colmap $scene --split test --option test_every=8 > $P/${data}_test_cameras.json
  s=$(date +%s); DATAS=$data RASTERS=tcgs_accutile $RUN train > $P/runs/gsexp_$data.log 2>&1
  log "gsexp $data rc=$? ($(( $(date +%s) - s )) s wall)"
  python experiments/peers/render_views.py $RC/runs/runs/${data}_tcgs_accutile --cameras $P/${data}_test_cameras.json \
    --out $P/renders/gsexp_$data --background 0,0,0 > $P/runs/gsexp_${data}_render.log 2>&1
  s=$(date +%s); PYTHONPATH=/tmp/peer_main:$PYTHONPATH PEERS=$data R=$RC/runs $RUN peer > $P/runs/main_$data.log 2>&1
  log "gsplat main $data rc=$? ($(( $(date +%s) - s )) s wall)"
  cp $RC/runs/peer/gsplat_$data.json $P/runs/main_$data.json 2>/dev/null
  rm -rf $P/renders/main_$data && cp -r $RC/runs/peer/renders_$data $P/renders/main_$data
  for who in gsexp main; do
    GSEXP_LPIPS_WEIGHTS=$GSEXP_SHARED/weights python experiments/peers/score.py $P/renders/${who}_$data colmap $scene \
      --option test_every=8 --nets alex --label ${who}_$data --out $P/scores/${who}_$data.json >> $P/scores/table.md 2>> $P/scores/errors.log
  done
  log "scored $data"
done
log "peers done"
# issue 41: each feature alone and together, two seeds, on beer (fern after, if time is left)
FEATS="base turbo app pose both grid" SEEDS="0 1" DATAS="beer_prepared" RASTERS=tcgs_accutile $RUN train > $P/study_beer.log 2>&1
log "study beer rc=$?"
FEATS="base turbo app pose both grid" SEEDS="0 1" DATAS="fern_prepared" RASTERS=tcgs_accutile $RUN train > $P/study_fern.log 2>&1
log "study fern rc=$?"
log "all done"
