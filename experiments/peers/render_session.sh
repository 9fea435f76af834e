#!/usr/bin/env bash
# The render tables of the peer study (experiments/peers/README.md), one GPU session, staged by
# `bash experiments/peers/stage.sh train`. Calls chained with no gap, as session.sh:
#   source .device/env.sh; setsid nohup bash experiments/peers/render_session.sh > /tmp/render.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "render session done"
# A trained lego (experiment=lego_fast) and the scale study's models grown from it (1, 3, 6 M),
# then biker and those at 1080p and 4K: gsexp vanilla + accutile (fp32) and tc_gs + accutile
# (fp16) against gsplat main (rasterization() defaults) and main's HiGS renderer in one process,
# interleaved rounds; then the same gsexp rows against gsplat 1.5.3 in a second process (two
# versions of a package cannot share one). JSON per table in /tmp/peers/render_<version>/.
set -u
W=/tmp/peers; mkdir -p $W
log() { echo "[$(date +%T)] $*" | tee -a $W/steps.log; }
log "render session start"
bash experiments/peers/session.sh install > /dev/null
source .device/peer_whl/commits.env; export GSPLAT_COMMIT
export LEGO=/tmp/lego W_SCALE=/tmp/scale
lego=$(ls -t $W/runs/gsexp_r*/point_cloud.ply 2>/dev/null | head -n 1)   # session.sh's lego, if it ran
if [ -n "$lego" ] && [ ! -f $W_SCALE/runs/base/point_cloud.ply ]; then
  mkdir -p $W_SCALE/runs/base && cp "$lego" $W_SCALE/runs/base/ && log "render: lego base is $lego"
fi
SIZES=${SIZES:-"1M 3M 6M"} TRAIN_SIZES="" W=$W_SCALE bash experiments/scale/run.sh base models > $W/models.log 2>&1
log "lego base + models rc=$?"
cp $W_SCALE/runs/base/point_cloud.ply $W_SCALE/models/lego_base.ply
OURS=vanilla:intersect=accutile,tc_gs:intersect=accutile
for v in ${VERSIONS:-main v153}; do   # VERSIONS=main: 1.5.3's render rows were measured before
  site=/tmp/peer_main; peers=gsplat,gsplat_higs
  [ $v = v153 ] && { site=/tmp/peer_153; peers=gsplat; }
  if [ $v = main ] && ! PYTHONPATH=$site:${PYTHONPATH:-} python -m gsexp.bench --ply .device/biker.compressed.ply \
       --width 320 --height 240 --num-cameras 1 --warmup 1 --frames 1 --rasterizers gsplat_higs > $W/higs_check.log 2>&1; then
    peers=gsplat; log "main: HiGS failed its first render, left out ($(tail -n 1 $W/higs_check.log))"
  fi
  out=$W/render_$v; mkdir -p $out
  PYTHONPATH=$site:${PYTHONPATH:-} RASTERIZERS=$OURS,$peers RENDER_DIR=$out SIZES="base ${SIZES:-1M 3M 6M}" \
    W=$W_SCALE bash experiments/scale/run.sh render > $out/scale.log 2>&1
  log "$v: lego models rc=$?"
  for r in 1920x1080 3840x2160; do
    [ -f $out/biker_$r.json ] || PYTHONPATH=$site:${PYTHONPATH:-} python -m gsexp.bench \
      --ply .device/biker.compressed.ply --width ${r%x*} --height ${r#*x} --num-cameras 4 --warmup 5 \
      --frames 10 --rounds 3 --rasterizers $OURS,$peers --json $out/biker_$r.json >> $out/biker.log 2>&1
    log "$v: biker $r rc=$?"
  done
done
log "render session done"
