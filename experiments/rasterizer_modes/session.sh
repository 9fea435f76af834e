#!/usr/bin/env bash
# Issue 38's study on one GPU session, as one background job. Staged here by
# `bash experiments/rasterizer_modes/stage.sh` (.device_modes: lego, prepared fern, the kernels from
# before the modes, AlexNet for LPIPS, gsexp's wheels; .device_pyc: pycolmap, which fern's loader
# needs and which does not fit beside them), then, chained:
#   carry .device_modes: source .device_modes/env.sh; setsid nohup bash experiments/rasterizer_modes/session.sh > /tmp/modes.log 2>&1 < /dev/null & sleep 2; bash experiments/peers/session.sh wait 560 "modes done"
#   carry .device_pyc:   source .device_modes/env.sh; tar xJf .device_pyc/pycolmap.tar.xz -C /tmp/site; bash experiments/peers/session.sh wait 580 "modes done"
#   then, until the MARK: source .device_modes/env.sh; bash experiments/peers/session.sh wait 580 "modes done"
# (fern's jobs wait for pycolmap, up to 10 min). The H100 session of 2026-12-06 took ~19 min.
# Runs, most needed first (one session's device time may not reach the last):
# 1. lego at half resolution (400x400, every 8th test view: the quick mode), 30K steps with
#    lego_fast's settings; fern prepared from its photos (gsexp.prepare) at half of images_8. Each
#    model is scored at 1/2x and 2x its training resolution (gsexp.eval data.downscale=4 and 1:
#    Mip-Splatting's single-scale-train, multi-scale-test protocol); tc_gs's models are
#    also rendered by python -m gsexp.bench in fp32 vanilla and fp16 tc_gs with the mode (the
#    image PSNR between them: tc_gs's fp16 error with the mode). ~75 s a run.
# 2. After the first lego model: defaults_unchanged.sh (the kernels from before the modes against
#    these, bit for bit, the render + backward time of lego_fast's rasterizer on that model and
#    lego_fast's step on its checkpoint, before against after; ~4 min), then the GPU tests.
set -u
# Everything under /tmp/peers, so that the peer study's `session.sh wait` waits for the MARK and
# packs it (peers.tgz; renders, checkpoints and PLYs left out).
S=${S:-.device_modes}
W=/tmp/peers/modes; mkdir -p $W/runs $W/eval $W/bench
log() { echo "[$(date +%T)] $*" | tee -a /tmp/peers/steps.log; }
export GSEXP_SHARED=$PWD/$S/shared   # AlexNet's ImageNet weights for LPIPS (no downloads there)
# data_raster_mode, in order
JOBS=${JOBS:-"lego_tc_gs_base lego_tc_gs_aa lego_vanilla_base lego_vanilla_aa lego_tc_gs_abs lego_tc_gs_both
  lego_vanilla_abs lego_vanilla_both fern_tc_gs_base fern_tc_gs_aa fern_tc_gs_abs fern_tc_gs_both
  lego_tc_gs_mip fern_vanilla_base fern_vanilla_aa"}
# A third session: JOBS="lego_tc_gs_base_s2 lego_tc_gs_mip01 lego_tc_gs_aa01_s1 lego_tc_gs_abs lego_tc_gs_mipq lego_tc_gs_mip"
#   PYTESTS="tests/test_cuda_antialiased.py tests/test_cuda_ssim.py" TEST_SHARED=.device_modes/shared:
#   the 3D filter with Mip-Splatting's reset, aa01's second seed, AbsGS as its code, the defaults with preprocess_ab,
#   test_cuda_antialiased's 0.1 px^2 bounds (one call, no .device_pyc).
# A second session (2026-12-06's has the rows above): a second seed, Mip-Splatting's own 2D filter
# (0.1 px^2), AbsGS at about base's Gaussian count, e.g.
#   JOBS="lego_tc_gs_base_s1 lego_tc_gs_mip01 lego_tc_gs_aa01 fern_tc_gs_mip01 fern_tc_gs_aa01 lego_tc_gs_abs2
#         fern_tc_gs_abs2 fern_tc_gs_base_s1 fern_tc_gs_aa_s1 fern_vanilla_aa_s1"   (a trailing _s<k>: seed k)
# defaults_unchanged (renders, then the step A/B) runs after the first lego tc_gs base job, whatever
# its seed. PYTESTS="tests/..." (those GPU tests, log gpu_tests.log), e.g. PYTESTS='tests/test_cuda*.py',
# run after the first job that ends once biker has come, or after the last job.
declare -A DATA=(
  [lego]="experiment=lego_fast data.path=/tmp/lego data.downscale=2"
  [fern]="data=colmap data.path=/tmp/fern_prepared data.downscale=2 iterations=30000 eval_every=0 checkpoint_every=0 log_every=100 pair_capacity=true"
)
declare -A RASTER=([tc_gs]="rasterizer=tc_gs rasterizer.intersect=accutile"
                   [vanilla]="rasterizer=vanilla rasterizer.intersect=accutile")
# abs: AbsGS as its code (splits by the absolute statistic, clones by 3DGS's gradient); before
# 2026-12-06 it chose clones by it too, which is absc now (the first two sessions' abs, both, abs2 rows)
declare -A MODE=([base]="" [aa]="rasterizer.antialiased=true" [abs]="strategy.options.absgrad=true"
                 [absc]="strategy.options.absgrad=true strategy.options.absgrad_rule=both"
                 [both]="rasterizer.antialiased=true strategy.options.absgrad=true"
                 [mip]="rasterizer.antialiased=true model.filter_3d=true"  # the 2D filter with the 3D one
                 [aa01]="rasterizer.antialiased=true rasterizer.dilation=0.1"  # Mip-Splatting's 2D filter
                 [mip01]="rasterizer.antialiased=true rasterizer.dilation=0.1 model.filter_3d=true"  # all of Mip-Splatting's paper
                 [mipq]="rasterizer.antialiased=true rasterizer.dilation=0.1 model.filter_3d=true strategy.options.absgrad=true strategy.options.absgrad_rule=quantile"  # and its code's densification
                 [abs2]="strategy.options.absgrad=true strategy.options.absgrad_threshold=0.0004")
spec() {  # a mode's rasterizer overrides as gsexp.bench spec keys: rasterizer.k=v -> :k=v
  local o; for o in ${MODE[$1]}; do [[ $o == rasterizer.* ]] && printf ':%s' "${o#rasterizer.}"; done; return 0
}

defaults_unchanged() {  # $1: the run whose model is rendered and timed, and whose checkpoint steps
  [ -f $S/modes_before.tgz ] || { log "defaults unchanged: no $S/modes_before.tgz"; return; }
  OUT=$W PLY=$1/point_cloud.ply bash experiments/rasterizer_modes/defaults_unchanged.sh run > $W/defaults_unchanged.log 2>&1
  log "defaults unchanged rc=$? ($(tail -1 $W/defaults_unchanged.txt 2>/dev/null))"
  OUT=$W RUN=$1 bash experiments/rasterizer_modes/defaults_unchanged.sh step > $W/step_ab.log 2>&1
  log "step A/B rc=$? ($(grep -c wall $W/step_ab.txt 2>/dev/null) timings)"
}

# The tests' shared folder: biker comes in .device_pyc/shared with the second call; tests that
# need no biker can take TEST_SHARED=.device_modes/shared (AlexNet only) and run in the first.
TEST_SHARED=${TEST_SHARED:-.device_pyc/shared}
gpu_tests() {  # once, when $TEST_SHARED has come; $1=wait: wait for it
  [ -n "${PYTESTS:-}" ] && [ ! -f $W/gpu_tests.log ] || return 0
  for _ in $(seq 600); do [ -d $TEST_SHARED ] || [ "${1:-}" != wait ] && break; sleep 1; done
  [ -d $TEST_SHARED ] || return 0
  nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu_tests.log 2>&1
  # shellcheck disable=SC2086  # the test files are words (and globs)
  GSEXP_SHARED=$PWD/$TEST_SHARED python -m pytest -q -p no:cacheprovider $PYTESTS >> $W/gpu_tests.log 2>&1
  log "gpu tests rc=$? ($(tail -1 $W/gpu_tests.log))"
}

log start
python experiments/webp_stage.py unpack $S/lego_webp /tmp/lego > $W/unpack.log 2>&1
python experiments/webp_stage.py unpack $S/fern_webp /tmp/fern_prepared >> $W/unpack.log 2>&1 &&
  tar xzf $S/fern_rest.tgz -C /tmp/fern_prepared; log "unpack rc=$? ($(tr '\n' ' ' < $W/unpack.log))"
python -c "from gsexp.render.cuda import build; build.load()" > $W/build.log 2>&1; log "build rc=$?"
for job in $JOBS; do
  seed=0; base=$job; [[ $job =~ _s([0-9]+)$ ]] && { seed=${BASH_REMATCH[1]}; base=${job%_s*}; }
  data=${base%%_*}; rest=${base#*_}; m=${rest##*_}; r=${rest%_*}; run=$W/runs/$job
  if [ "$data" = fern ]; then  # pycolmap comes with the second call
    for _ in $(seq 600); do [ -d /tmp/site/pycolmap ] && break; sleep 1; done
  fi
  s=$(date +%s)
  # shellcheck disable=SC2086  # the overrides are words
  python train.py ${DATA[$data]} ${RASTER[$r]} ${MODE[$m]} seed=$seed logger=none lpips_net=alex \
    hydra.run.dir=$run resume=auto > $W/runs/$job.log 2>&1
  log "train $job rc=$? ($(( $(date +%s) - s )) s wall)"
  for scale in 4 1; do
    python -m gsexp.eval $run data.downscale=$scale lpips_net=alex out=$W/eval/${job}_ds$scale > $W/eval/${job}_ds$scale.log 2>&1
  done
  if [ "$r" = tc_gs ]; then  # lego: 4 orbit views at 800x800; fern: its test views at images_8's size
    cams="--up z --width 800 --height 800 --num-cameras 4"
    [ "$data" = fern ] && cams="--cameras test --data-kind colmap --data-path /tmp/fern_prepared --num-cameras 0"
    # shellcheck disable=SC2086  # the camera options are words
    python -m gsexp.bench --ply $run/point_cloud.ply $cams --frames 5 --rounds 1 \
      --rasterizers "vanilla:intersect=accutile$(spec $m),tc_gs:intersect=accutile$(spec $m)" \
      --json $W/bench/$job.json > $W/bench/$job.log 2>&1
  fi
  log "scored $job"
  if [ "$data/$r/$m" = lego/tc_gs/base ] && [ ! -f $W/defaults_unchanged.txt ]; then defaults_unchanged $run; fi
  gpu_tests  # as soon as biker is here, so that a short session still has the log
done
python experiments/rasterizer_modes/modes_table.py $W > $W/table.md 2>&1; log "table rc=$?"
gpu_tests wait
log "modes done"
