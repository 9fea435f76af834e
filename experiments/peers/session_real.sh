#!/usr/bin/env bash
# Issue 36's real captures, then issue 41's study, as one background job on the GPU machine.
# Staged here with `bash experiments/peers/stage.sh real` (.device_real, 55 MiB). Calls, chained:
#   carry .device_real: source .device_real/env.sh; setsid nohup bash experiments/peers/session_real.sh > /tmp/real.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "real done"
#   then, carrying nothing: source .device_real/env.sh; bash experiments/peers/session.sh wait 580 "real done"
# Everything it keeps is under /tmp/peers/real (the runs' folders too), so session.sh's wait packs
# it into peers.tgz as for lego (renders, checkpoints and PLYs left out).
# 1. beer and fern prepared from their photos (gsexp.prepare), one round each, alternating:
#    gsexp (tc_gs + accutile, lego_fast's step settings) then gsplat main + fused-ssim through
#    train_gsplat.py on the same loaded data; both render the test views to 8-bit PNGs and score.py
#    scores every folder the same way (LPIPS on AlexNet: VGG does not fit in the call).
# 2. issues 41 and 40 on beer: FEATS (appearance, pose, bilateral grid; capture_turbo's recipes) x two seeds, as long as
#    the session lasts (run.sh skips finished runs, so a later session goes on from where it stopped).
# ~12 min for part 1 (builds 2, prepare 1, four runs ~8), then ~80 s per study run.
set -u
S=.device_real; P=/tmp/peers/real; RC=/tmp/real_captures; mkdir -p $P/renders $P/scores $P/runs
log() { echo "[$(date +%T)] $*" | tee -a /tmp/peers/steps.log; }
# run.sh: scenes and the undistortion cache in W, run folders (gsexp's and the peer's) in R
export D=$S/data W=$RC R=$P/rc GSEXP_SHARED=$PWD/$S/shared EXTRA="log_every=100 pair_capacity=true lpips_net=alex"
RUN="bash experiments/real_captures/run.sh"
log start
tar xJf $S/pycolmap.tar.xz -C /tmp/site; log "pycolmap rc=$?"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peer_main $S/peer_whl/gsplat-1.6.0-*.whl \
  $S/peer_whl/fused_ssim-*.whl > $P/pip_main.log 2>&1; log "gsplat main install rc=$?"
python -c "from gsexp.render.cuda import build; build.load()" > $P/build.log 2>&1; log "gsexp build rc=$?"
DATAS="beer_prepared fern_prepared" $RUN scenes > $P/scenes.log 2>&1; log "prepare beer, fern rc=$?"
for data in beer_prepared fern_prepared; do cp $RC/$data/prepare.json $P/$data.prepare.json; done
source $S/peer_whl/commits.env; export GSPLAT_COMMIT FUSED_SSIM_COMMIT
for data in beer_prepared fern_prepared; do
  scene=$RC/$data
  python experiments/peers/cameras.py colmap $scene --split test --option test_every=8 > $P/${data}_test_cameras.json
  s=$(date +%s); DATAS=$data RASTERS=tcgs_accutile $RUN train > $P/runs/gsexp_$data.log 2>&1
  log "gsexp $data rc=$? ($(( $(date +%s) - s )) s wall)"
  python experiments/peers/render_views.py $R/runs/${data}_tcgs_accutile --cameras $P/${data}_test_cameras.json \
    --out $P/renders/gsexp_$data --background 0,0,0 > $P/runs/gsexp_${data}_render.log 2>&1
  s=$(date +%s); PYTHONPATH=/tmp/peer_main:$PYTHONPATH PEERS=$data $RUN peer > $P/runs/main_$data.log 2>&1
  log "gsplat main $data rc=$? ($(( $(date +%s) - s )) s wall)"   # its record: $R/peer/gsplat_$data.json
  for who in gsexp main; do
    renders=$P/renders/gsexp_$data; [ $who = main ] && renders=$R/peer/renders_$data
    GSEXP_LPIPS_WEIGHTS=$GSEXP_SHARED/weights python experiments/peers/score.py $renders colmap $scene \
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
log "real done"
