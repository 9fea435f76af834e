#!/usr/bin/env bash
# One GPU session for issue 21 (experiments/real_captures): the rows the first session left
# (fern, more seeds of beer, the rest), in that order, as long as the session lasts. Staged with
#   python ../shared/tools/stage_gpu_job.py --colmap --peer --scene colmap/beer
#   cp ../shared/tools/peer_train_gsplat.py .device/; mkdir -p .device/shared/weights
#   cp ../shared/weights/alexnet_features_imagenet.pth .device/shared/weights/   # LPIPS (alex)
#   w=$(ls .device/whl/pycolmap-*.whl); mkdir /tmp/u && unzip -q -d /tmp/u $w && rm $w    # pycolmap's wheel, 38 MB,
#   tar cf - -C /tmp/u . | xz -9e > .device/pycolmap.tar.xz                          # travels as 21 MB of tar.xz
#   cp -r ../shared/data/llff/fern .device/data/                                      # fern, 7.3 MB
# 52 MiB beside a 3.5 MiB checkout, under the 64 MiB a call carries. Without fern the fern
# steps are skipped.
# On the GPU machine (the machine goes 30 s after a call: chain the calls with no gap):
#   source .device/env.sh; mkdir -p /tmp/rc; setsid nohup bash experiments/real_captures/h200_beer_session.sh > /tmp/rc/job.log 2>&1 < /dev/null &
#   sleep 540; bash experiments/real_captures/h200_beer_session.sh collect        # then: sleep N; bash ... collect
# collect packs what is done into $OUT/rc.tgz (a call brings back 8 files at most).
# run.sh skips finished runs and resumes cut ones, so the script can be started again.
set -u
L=/tmp/rc; mkdir -p $L
log() { echo "[$(date +%T)] $*" | tee -a $L/steps.log; }
RUN="bash experiments/real_captures/run.sh"
if [ "${1:-}" = collect ]; then
  cat $L/steps.log
  # a call brings back at most 8 files: everything goes into one archive
  rm -rf $L/out && mkdir -p $L/out/logs
  OUT=$L/out $RUN collect
  cp $L/*.log $L/out/logs/; tail -n 3 /tmp/real_captures/runs/runs/*/train.log > $L/out/logs/tails.txt 2>&1
  tar czf "$OUT"/rc.tgz -C $L/out . && ls -la "$OUT"
  exit 0
fi
export GSEXP_SHARED=$PWD/.device/shared                   # the AlexNet weights for LPIPS
export EXTRA="log_every=100 pair_capacity=true lpips_net=alex"  # lego_fast's step settings (no host sync per step)
log start
[ -f .device/pycolmap.tar.xz ] && { tar xJf .device/pycolmap.tar.xz -C /tmp/site; log "pycolmap unpacked rc=$?"; }
python -c "from gsexp.render.cuda import build; build.load()" > $L/build.log 2>&1; log "build rc=$?"
# 2026-12-04 (two sessions) filled the grid but for vanilla on the prepared scenes and the peer on
# the undistorted ones; those run now, quickest first.
if [ -d .device/data/fern ]; then
  DATAS=fern_prepared $RUN scenes > $L/scenes_fern.log 2>&1; log "prepare fern rc=$?"
  DATAS=fern_prepared RASTERS=vanilla $RUN train > $L/train_fern_vanilla.log 2>&1; log "fern vanilla prepared rc=$?"
fi
s=$(date +%s); DATAS=beer_prepared $RUN scenes > $L/scenes_beer.log 2>&1; log "prepare beer rc=$? ($(( $(date +%s) - s )) s)"
DATAS=beer_prepared RASTERS=vanilla $RUN train > $L/train_beer_vanilla.log 2>&1; log "beer vanilla prepared rc=$?"
[ -d .device/data/fern ] && { PEERS=fern_undistorted $RUN peer > $L/peer_fern_undistorted.log 2>&1; log "peer fern_undistorted rc=$?"; }
PEERS=beer_undistorted $RUN peer > $L/peer_beer_undistorted.log 2>&1; log "peer beer_undistorted rc=$?"
log done
