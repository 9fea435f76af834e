#!/usr/bin/env bash
# The scaling study on the GPU machine (issue 23), from the checkout, after `source .device/env.sh`
# (staged with `python ../shared/tools/stage_gpu_job.py --peer`). One step per argument:
#   base     lego 30K with experiment=lego_fast: the trained SH-3 model the others grow from
#   models   grow it (python -m gsexp.bench.grow) to each of $SIZES and $TRAIN_SIZES
#   render   python -m gsexp.bench per model and resolution: 4 gsexp variants + gsplat, interleaved
#   train    train_step.py per size, gsexp then gsplat, $ROUNDS rounds
#   profile  train_step.py --profile at $PROFILE_SIZES: each trainer's costliest kernels
#   collect  summarize.py into $W/summary, and a tarball of the JSON files to $OUT
# Steps skip what an earlier call finished, so a call cut at its time limit can be run again.
set -euo pipefail
W=${W:-/tmp/scale}
SIZES=${SIZES-"250K 500K 1M 2M 4M 6M"}
TRAIN_SIZES=${TRAIN_SIZES-"1M 3M 6M"}
PROFILE_SIZES=${PROFILE_SIZES-"3M"}
RESOLUTIONS=${RESOLUTIONS:-"1920x1080 3840x2160"}
ROUNDS=${ROUNDS:-2}
LEGO=${LEGO:-${GSEXP_SHARED:-../shared}/data/nerf_synthetic/lego}
LPIPS_NET=${LPIPS_NET:-vgg}        # alex where only AlexNet's weights are staged
RASTERIZERS=${RASTERIZERS:-vanilla,vanilla:intersect=accutile,tc_gs,tc_gs:intersect=accutile}
RENDER_DIR=${RENDER_DIR:-$W/render}   # the render step's JSON (experiments/peers: one per gsplat version)
mkdir -p "$W"/models "$RENDER_DIR" "$W"/train "$W"/profile

for step in "$@"; do
  case $step in
    base)
      [ -f "$W"/runs/base/point_cloud.ply ] ||
        python train.py experiment=lego_fast data.path="$LEGO" logger=none hydra.run.dir="$W"/runs/base resume=auto \
          lpips_net="$LPIPS_NET" ;;
    models)
      for s in $(echo $SIZES $TRAIN_SIZES | tr ' ' '\n' | sort -u); do
        [ -f "$W"/models/lego_$s.ply ] || python -m gsexp.bench.grow "$W"/runs/base/point_cloud.ply \
          "$W"/models/lego_$s.ply --gaussians "$s" --seed 0
      done ;;
    render)
      for s in $SIZES; do for r in $RESOLUTIONS; do
        out="$RENDER_DIR"/lego_${s}_$r.json
        [ -f "$out" ] || python -m gsexp.bench --ply "$W"/models/lego_$s.ply --up z --width "${r%x*}" \
          --height "${r#*x}" --num-cameras 4 --warmup 5 --frames 10 --rounds 3 --rasterizers $RASTERIZERS --json "$out"
      done; done ;;
    train)
      for round in $(seq "$ROUNDS"); do for s in $TRAIN_SIZES; do for t in gsexp gsplat; do
        out="$W"/train/${t}_${s}_r$round.json
        [ -f "$out" ] || python experiments/scale/train_step.py --ply "$W"/models/lego_$s.ply --trainer $t \
          --data-path "$LEGO" --steps 100 --warmup 100 --out "$out"  # warm-up: a pass over lego's 100
          # views, so the pair capacity has seen every view's count before the clock (no dropped pairs)
      done; done; done ;;
    profile)  # where the step goes, per trainer: the kernels of 20 steps after 30 timed
      for s in $PROFILE_SIZES; do for t in gsexp gsplat; do
        out="$W"/profile/${t}_$s.json
        [ -f "$out" ] || python experiments/scale/train_step.py --ply "$W"/models/lego_$s.ply --trainer $t \
          --data-path "$LEGO" --steps 30 --warmup 100 --profile 20 --top 15 --out "$out"
      done; done ;;
    collect)
      python experiments/scale/summarize.py "$W" --out "$W"/summary
      if [ -n "${OUT:-}" ]; then
        tar czf "$OUT"/scale.tgz -C "$W" render train profile summary
      fi ;;
    *) echo "run.sh: unknown step '$step' (base, models, render, train, profile, collect)" >&2; exit 2 ;;
  esac
done
