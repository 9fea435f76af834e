#!/usr/bin/env bash
# Issue 38's study on one GPU session, as one background job (staged as the peer study's lego:
# `bash experiments/peers/stage.sh train`, then `bash experiments/rasterizer_modes/defaults_unchanged.sh stage`):
#   carry .device: source .device/env.sh; setsid nohup bash experiments/rasterizer_modes/session.sh > /tmp/modes.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "modes done"
#   then:          source .device/env.sh; bash experiments/peers/session.sh wait 580 "modes done"
# 1. defaults_unchanged.sh run: the kernels from before the modes against these, bit for bit (~4 min).
# 2. lego at half resolution (400x400, every 8th test view: the quick mode), 30K steps with
#    lego_fast's settings, MODES x RASTERS; each model then scored at 1/2x and 2x the training
#    resolution (gsexp.eval data.downscale=4 and 1: Mip-Splatting's single-scale-train,
#    multi-scale-test protocol) and rendered by python -m gsexp.bench with fp32 vanilla and fp16
#    tc_gs in its mode (the image PSNR between them: tc_gs's fp16 error with the mode). ~75 s a run.
set -u
# Everything under /tmp/peers, so that the peer study's `session.sh wait` waits for the MARK and
# packs it (peers.tgz; renders, checkpoints and PLYs left out).
W=/tmp/peers/modes; mkdir -p $W/runs $W/eval $W/bench
log() { echo "[$(date +%T)] $*" | tee -a /tmp/peers/steps.log; }
MODES=${MODES:-"base aa abs both mip"}   # mip: the 2D filter with the 3D one, the whole of Mip-Splatting
RASTERS=${RASTERS:-"tc_gs vanilla"}
declare -A MODE=([base]="" [aa]="rasterizer.antialiased=true" [abs]="strategy.options.absgrad=true"
                 [both]="rasterizer.antialiased=true strategy.options.absgrad=true"
                 [mip]="rasterizer.antialiased=true model.filter_3d=true")
declare -A SPEC=([base]="" [aa]=":antialiased=true" [abs]="" [both]=":antialiased=true" [mip]=":antialiased=true")
log start
[ -d /tmp/lego ] || python experiments/webp_stage.py unpack .device/lego_webp /tmp/lego > $W/unpack.log 2>&1
python -c "from gsexp.render.cuda import build; build.load()" > $W/build.log 2>&1; log "build rc=$?"
if [ -f .device/modes_before.tgz ]; then
  OUT=$W bash experiments/rasterizer_modes/defaults_unchanged.sh run > $W/defaults_unchanged.log 2>&1
  log "defaults unchanged rc=$? ($(tail -1 $W/defaults_unchanged.txt 2>/dev/null))"
fi
for m in $MODES; do for r in $RASTERS; do
  name=${r}_$m; run=$W/runs/$name
  raster=""; [ "$r" = vanilla ] && raster="rasterizer=vanilla rasterizer.intersect=accutile"
  s=$(date +%s)
  # shellcheck disable=SC2086  # the overrides are words
  python train.py experiment=lego_fast data.path=/tmp/lego data.downscale=2 $raster ${MODE[$m]} logger=none \
    lpips_net=alex hydra.run.dir=$run resume=auto > $W/runs/$name.log 2>&1
  log "train $name rc=$? ($(( $(date +%s) - s )) s wall)"
  for scale in 4 1; do
    python -m gsexp.eval $run data.downscale=$scale lpips_net=alex out=$W/eval/${name}_ds$scale > $W/eval/${name}_ds$scale.log 2>&1
  done
  if [ "$r" = tc_gs ]; then
    python -m gsexp.bench --ply $run/point_cloud.ply --up z --width 800 --height 800 --num-cameras 4 --frames 5 --rounds 1 \
      --rasterizers "vanilla:intersect=accutile${SPEC[$m]},tc_gs:intersect=accutile${SPEC[$m]}" \
      --json $W/bench/$name.json > $W/bench/$name.log 2>&1
  fi
  log "scored $name"
done; done
python experiments/rasterizer_modes/modes_table.py $W > $W/table.md 2>&1; log "table rc=$?"
log "modes done"
