#!/usr/bin/env bash
# One GPU session of the peer study on lego (experiments/peers/README.md), after
# `bash experiments/peers/stage.sh train` and `... truth` here. On the GPU machine, calls chained
# with no gap (the machine goes 30 s after a call, and /tmp with it):
#   1  carry .device:      source .device/env.sh; setsid nohup bash experiments/peers/session.sh run \
#                            > /tmp/peers.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560
#   2… carry nothing:      source .device/env.sh; bash experiments/peers/session.sh wait 580   # until "done"
#   n  carry .device_gt1:  source .device/env.sh; bash experiments/peers/session.sh truth
#   n+1 carry .device_gt2: source .device/env.sh; bash experiments/peers/session.sh truth    # scores, packs $OUT
# run: builds, the owed GPU checks, then ROUNDS rounds of lego 30K alternating gsexp lego_fast,
# gsplat main + fused-ssim and gsplat 1.5.3 + fused-ssim, each rendering lego's 200 test cameras
# to 8-bit PNGs. truth: unpacks a half of the 200 test images; with both halves there, scores
# every render folder with score.py (the same script and files for every trainer).
set -u
W=/tmp/peers; mkdir -p $W/runs $W/renders $W/scores
log() { echo "[$(date +%T)] $*" | tee -a $W/steps.log; }
ROUNDS=${ROUNDS:-2}
TRAINERS=${TRAINERS:-"gsexp main v153"}
ITERS=${ITERS:-30000}
pack() {  # everything small into one archive under $OUT (a call brings back 8 files)
  mkdir -p "$OUT"; cp $W/steps.log "$OUT"/ 2>/dev/null
  tar czf "$OUT"/peers.tgz -C /tmp --exclude='*.png' --exclude='*.pt' --exclude='*.ply' --exclude=wandb peers
}
case "${1:-}" in
wait)
  for _ in $(seq "${2:-0}"); do grep -q "] done" $W/steps.log 2>/dev/null && break; sleep 1; done
  cat $W/steps.log; pack; exit 0 ;;
truth)
  python experiments/webp_stage.py unpack "$(ls -d .device_gt* | head -1)" /tmp/lego_gt > $W/truth.log 2>&1 || { tail -3 $W/truth.log; exit 1; }
  n=$(ls /tmp/lego_gt/test | wc -l); log "truth: $n of 200 test images here"
  if [ "$n" -ge 200 ]; then
    cp -rn /tmp/lego/train /tmp/lego/transforms_train.json /tmp/lego_gt/   # the loader reads both splits
    for d in $W/renders/*/; do
      name=$(basename "$d")
      python experiments/peers/score.py "$d" blender /tmp/lego_gt --label "$name" --out $W/scores/$name.json \
        >> $W/scores/table.md 2>> $W/scores/errors.log
    done
    log "scored $(ls $W/scores/*.json | wc -l) render folders"; cat $W/scores/table.md
  fi
  pack; exit 0 ;;
install)  # the peers side by side (two versions cannot share one site), lego, gsexp's build
  pip_target() { python3 -m pip install -q --no-index --no-deps --no-compile --target "$1" "${@:2}" > $W/pip.log 2>&1; }
  if [ -f .device/peer_src.tgz ] && ! ls .device/peer_whl/gsplat-1.6.0-*.whl > /dev/null 2>&1; then
    mkdir -p /tmp/peer_src && tar xzf .device/peer_src.tgz -C /tmp/peer_src
    PY=python3 bash experiments/peers/build_wheels.sh build /tmp/peer_src .device/peer_whl > $W/build_peers.log 2>&1
    log "install: gsplat main + fused-ssim built here rc=$?"
  fi
  [ -d /tmp/peer_main ] || pip_target /tmp/peer_main .device/peer_whl/gsplat-1.6.0-*.whl .device/peer_whl/fused_ssim-*.whl
  [ -d /tmp/peer_153 ] || pip_target /tmp/peer_153 .device/peer_whl/gsplat-1.5.3-*.whl .device/peer_whl/fused_ssim-*.whl
  [ -d /tmp/lego ] || python experiments/webp_stage.py unpack .device/lego_webp /tmp/lego > $W/unpack.log 2>&1
  python -c "from gsexp.render.cuda import build; build.load()" > $W/build.log 2>&1; log "install: gsexp build rc=$?"
  exit 0 ;;
run) ;;
*) echo "usage: session.sh run | install | wait SECONDS | truth" >&2; exit 2 ;;
esac

log start
source .device/peer_whl/commits.env; export GSPLAT_COMMIT FUSED_SSIM_COMMIT
bash experiments/peers/session.sh install
# gsplat 1.5.3 compiles its CUDA on first use, as `pip install gsplat` users see it: done here,
# untimed, beside the checks owed from the CPU side (issue 36: 6bd1c01's tolerances, the fused loss)
(PYTHONPATH=/tmp/peer_153:$PYTHONPATH python -c "import torch, gsplat; from gsplat.cuda._backend import _C; print(gsplat.__version__, _C)" \
   > $W/jit_153.log 2>&1; log "gsplat 1.5.3 first-use build rc=$?") &
timeout 420 python -m pytest -q tests/test_cuda_rasterizer.py tests/test_cuda_ssim.py tests/test_cuda_preprocess_backward.py \
  > $W/gpu_tests.log 2>&1; log "gpu tests rc=$? ($(tail -n 1 $W/gpu_tests.log))"
wait
for r in $(seq "$ROUNDS"); do for t in $TRAINERS; do
  out=$W/runs/${t}_r$r; [ -f $out.json ] && continue
  s=$(date +%s)
  case $t in
    gsexp) python train.py experiment=lego_fast data.path=/tmp/lego logger=none hydra.run.dir=$out > $out.log 2>&1 &&
             python experiments/peers/render_views.py $out --cameras .device/lego_test_cameras.json \
               --out $W/renders/${t}_r$r >> $out.log 2>&1 && cp $out/summary.json $out.json ;;
    main|v153)
      site=/tmp/peer_main; [ $t = v153 ] && site=/tmp/peer_153
      PYTHONPATH=$site:$PYTHONPATH python experiments/peers/train_gsplat.py --experiment lego_fast --path /tmp/lego \
        --iters $ITERS --cameras .device/lego_test_cameras.json --renders $W/renders/${t}_r$r --out $out.json \
        > $out.log 2>&1 ;;
  esac
  log "$t round $r rc=$? ($(( $(date +%s) - s )) s wall)"
done; done
log done
