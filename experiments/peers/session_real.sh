#!/usr/bin/env bash
# Issue 36's real captures, then issue 41's study, as one background job on the GPU machine.
# Staged here with `bash experiments/peers/stage.sh real` (.device_real, 36 MiB). Calls, chained:
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
# Later sessions export their own lines before the first call's `setsid nohup ...`; each one's line
# is in its results.md (experiments/peers/h*_real/results.md). Issue 41's two seeds per feature on
# both captures were completed on 2026-12-07f, e.g. (STUDY_FEATS_<scene> replaces STUDY_FEATS for
# that scene; feat@s: seed s only, run.sh; PROFILE_RUNS=<run names> profiles finished runs):
#   PEER_RUNS="" PROFILE_FEATS="" SKIP_CHECKS=1 STUDY_DATAS="fern_prepared beer_prepared" STUDY_SEEDS="0"
#   STUDY_FEATS_fern="app app@1 pose pose@1" STUDY_FEATS_beer="grid@1"
# The next (~8 min of runs, two calls): capture_turbo (fast10k_d3k_nr) beside capture_fast (base) on
# the H200, which neither has run on, then where pose_opt's test PSNR goes on fern (1.75 dB) and beer:
#   PEER_RUNS="" PROFILE_FEATS="" SKIP_CHECKS=1 STUDY_DATAS="fern_prepared beer_prepared" STUDY_SEEDS="0"
#   STUDY_FEATS_fern="base fast10k_d3k_nr pose pose@1" STUDY_FEATS_beer="base fast10k_d3k_nr pose"
#   DRIFT_RUNS="fern_prepared_tcgs_accutile_pose fern_prepared_tcgs_accutile_pose_s1 beer_prepared_tcgs_accutile_pose"
# A second pass on a warm machine finds the first's "real done": wait with WAIT_COUNT=2.
set -u
# What runs (defaults: the first session's plan)
PEER_RUNS=${PEER_RUNS-beer_prepared:0 fern_prepared:0}   # data:seed, each trained by both trainers ("": none)
STUDY_DATAS=${STUDY_DATAS:-beer_prepared fern_prepared}; STUDY_FEATS=${STUDY_FEATS:-base turbo app pose both grid}
STUDY_SEEDS=${STUDY_SEEDS:-0 1}
S=.device_real; P=/tmp/peers/real; RC=/tmp/real_captures; mkdir -p $P/renders $P/scores $P/runs
log() { echo "[$(date +%T)] $*" | tee -a /tmp/peers/steps.log; }
# LPIPS's AlexNet is not in .device_real (with it, it and the checkout passed a call's 64 MiB):
# the lego truth call's .device_gt2 (carried earlier on this machine, or alone in a call before) has it
A=alexnet_features_imagenet.pth
if [ ! -f $S/shared/weights/$A ] && [ -f .device_gt2/weights/$A ]; then
  mkdir -p $S/shared && ln -sfn $PWD/.device_gt2/weights $S/shared/weights
fi
[ -f $S/shared/weights/$A ] || log "no $A (carry .device_gt2 in a call before): LPIPS will be null"
# run.sh: scenes and the undistortion cache in W, run folders (gsexp's and the peer's) in R
export D=$S/data W=$RC R=$P/rc GSEXP_SHARED=$PWD/$S/shared EXTRA="log_every=100 pair_capacity=true lpips_net=alex"
RUN="bash experiments/real_captures/run.sh"
log start
tar xJf $S/pycolmap.tar.xz -C /tmp/site; log "pycolmap rc=$?"
if [ -n "$PEER_RUNS" ]; then   # stage.sh real stages no peer wheels where none were built
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peer_main $S/peer_whl/gsplat-1.6.0-*.whl \
    $S/peer_whl/fused_ssim-*.whl > $P/pip_main.log 2>&1; log "gsplat main install rc=$?"
  source $S/peer_whl/commits.env; export GSPLAT_COMMIT FUSED_SSIM_COMMIT
fi
python -c "from gsexp.render.cuda import build; build.load()" > $P/build.log 2>&1; log "gsexp build rc=$?"
# no host sync in a training step, with each per-view feature (the first session's pose runs synced)
# and the trainer's own Adam container (stop 48) on CUDA: its first GPU run
# (SKIP_CHECKS=1: a session that has logged them, or a second pass in one session)
if [ -z "${SKIP_CHECKS:-}" ]; then
  timeout 300 python -m pytest -q -p no:cacheprovider tests/test_cuda_step_sync.py tests/test_optim.py \
    > $P/sync_test.log 2>&1; log "step sync test rc=$?"
  # issue 39: which imports make the trainer's ~6 s start-up here (2.3 s on the 2-core machine)
  python -X importtime -c "import train; import gsexp.train.recipe" 2> $P/importtime.txt > /dev/null; log "importtime rc=$?"
fi
DATAS="$PEER_RUNS $STUDY_DATAS" $RUN scenes > $P/scenes.log 2>&1; log "prepare beer, fern rc=$?"
for data in beer_prepared fern_prepared; do cp $RC/$data/prepare.json $P/$data.prepare.json 2>/dev/null; done
for item in $PEER_RUNS; do
  data=${item%%:*}; seed=${item##*:}; scene=$RC/$data
  [ -f $P/${data}_test_cameras.json ] ||
    python experiments/peers/cameras.py colmap $scene --split test --option test_every=8 > $P/${data}_test_cameras.json
  name=$data; [ $seed = 0 ] || name=${data}_s$seed   # run.sh's names for seed s
  s=$(date +%s); DATAS=$data SEEDS=$seed RASTERS=tcgs_accutile $RUN train > $P/runs/gsexp_$name.log 2>&1
  log "gsexp $name rc=$? ($(( $(date +%s) - s )) s wall)"
  run=${data}_tcgs_accutile; [ $seed = 0 ] || run=${run}_s$seed
  python experiments/peers/render_views.py $R/runs/$run --cameras $P/${data}_test_cameras.json \
    --out $P/renders/gsexp_$name --background 0,0,0 > $P/runs/gsexp_${name}_render.log 2>&1
  s=$(date +%s); PYTHONPATH=/tmp/peer_main:${PYTHONPATH:-} PEERS=$data SEEDS=$seed $RUN peer > $P/runs/main_$name.log 2>&1
  log "gsplat main $name rc=$? ($(( $(date +%s) - s )) s wall)"   # its record: $R/peer/gsplat_$name.json
  for who in gsexp main; do
    renders=$P/renders/gsexp_$name; [ $who = main ] && renders=$R/peer/renders_$name
    GSEXP_LPIPS_WEIGHTS=$GSEXP_SHARED/weights python experiments/peers/score.py $renders colmap $scene \
      --option test_every=8 --nets alex --label ${who}_$name --out $P/scores/${who}_$name.json >> $P/scores/table.md 2>> $P/scores/errors.log
  done
  log "scored $name"
done
python experiments/peers/real_table.py $P > $P/real_table.md 2>&1; log "peers done"
# issue 41: where a per-view feature's extra step time goes (PROFILE_FEATS, e.g. "base pose app"):
# a 3K-step run each, then tools/profile_step.py (the kernels' sum against the wall time, launches)
for feat in ${PROFILE_FEATS:-}; do
  ITERS=3000 FEATS=$feat DATAS=beer_prepared RASTERS=tcgs_accutile R=$P/prof $RUN train > $P/prof_$feat.log 2>&1
  run=$P/prof/runs/beer_prepared_tcgs_accutile; [ $feat = base ] || run=${run}_$feat
  timeout 240 python tools/profile_step.py $run --steps 200 > $P/profile_$feat.txt 2>&1; log "profile $feat rc=$?"
done
# issue 41: each feature alone and together, on each study scene in turn
# (STUDY_FEATS_<scene>, e.g. STUDY_FEATS_fern="batch2", overrides STUDY_FEATS for that scene)
for data in $STUDY_DATAS; do
  feats_var=STUDY_FEATS_${data%%_*}
  FEATS="${!feats_var:-$STUDY_FEATS}" SEEDS="$STUDY_SEEDS" DATAS="$data" RASTERS=tcgs_accutile $RUN train > $P/study_$data.log 2>&1
  log "study $data rc=$?"
done
# issue 41 item 4: a finished study run's step profiled (PROFILE_RUNS, run names under $R/runs, e.g.
# beer_prepared_tcgs_accutile_batch2_s1): the kernels' share of a k-view step's wall time
for run in ${PROFILE_RUNS:-}; do
  timeout 150 python tools/profile_step.py $R/runs/$run --steps 200 > $P/profile_$run.txt 2>&1
  log "profile $run rc=$?: $(tail -1 $P/profile_$run.txt)"
done
# issue 41: where a finished pose_opt run's test PSNR went (DRIFT_RUNS, run names under $R/runs, e.g.
# fern_prepared_tcgs_accutile_pose): the corrections' shared part, its test views moved by it, and
# each aligned alone (experiments/real_captures/pose_drift.py; a few seconds each)
for run in ${DRIFT_RUNS:-}; do
  timeout 240 python experiments/real_captures/pose_drift.py $R/runs/$run --out $P/drift_$run.json > $P/drift_$run.txt 2>&1
  log "drift $run rc=$?: $(tail -1 $P/drift_$run.txt)"
done
log "real done"
