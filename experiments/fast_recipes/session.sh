#!/usr/bin/env bash
# The training-recipe study on lego (issue 40) in one GPU session, staged as the peer study
# (`bash experiments/peers/stage.sh train` and `... truth`, experiments/peers/README.md):
#   carry .device:  source .device/env.sh; setsid nohup bash experiments/fast_recipes/session.sh > /tmp/recipes.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "recipes done"
#   then waits (MARK "recipes done"), then experiments/peers/session.sh's truth calls: they score
#   every render folder on lego's 200 test views.
# Each recipe alone and combined, against lego_fast, SEEDS seeds, one after another on one GPU:
#   fast      experiment=lego_fast
#   res       + schedule.resolution=auto
#   budget    + strategy=budget (2x the initial Gaussians)
#   turbo     experiment=lego_turbo (the budget; 7K two-view steps since 2026-12-07g, 14K one-view
#             steps before it (15K until 12-07d); no resolution schedule since 2026-12-06f: before, it
#             had one, the budget following it)
#   turbo_free  lego_turbo with the resolution schedule but without the primitive schedule
#             (follow_resolution=false). Before 2026-12-07c it set no schedule, and since lego_turbo
#             lost its schedule (12-06f) follow_resolution acts on nothing: 12-07c's turbo_free runs
#             are lego_turbo runs
#   turbo15k, turbo20k  lego_turbo in 15K / 20K one-view steps (every schedule scaled): the frontier toward
#             the issue's 30 s; any turbo<N>k[_b<M>][_d<D>]... likewise, in N thousand steps [with a
#             budget of M x the initial Gaussians] [_res: with the resolution schedule] [_d<D>: its
#             coarsest level 1/D of the size] [_f<F>: full size from F x the steps, e.g. _f0.35]
#             [_nores: no resolution schedule] [_split: tile_split=auto] [_nosplit: tile_split=none]
#             [_quarters: tile_split=quarters at every size] [_bs<K>: K views a step, e.g. turbo7k_bs2:
#             14K views in 7K steps], e.g. turbo12k, turbo15k_res_nosplit
#             (lego_turbo of 2026-12-06e), turbo15k_res_d2, turbo15k_quarters.
#             History: 12-06e's turbo15k_b2.5 is 12-06f's turbo (res, no split); 12-06f's turbo15k_nores_split
#             ran lego_turbo's kernels (at 800x800 tile_split=auto is none)
#   fast_quarters  lego_fast with tile_split=quarters (splitbench: quarters was faster at 800x800 too)
#   batch2, batch4  lego_fast with batch_size=k and 30000/k steps (as many views; issue 41): whether k
#             views a step train faster per view, and what it costs in quality (not in RECIPES by default)
#   hostprof  no training: experiments/fast_recipes/host_profile.py on lego_turbo at steps 100, 2500
#             and 12000 (1/4, ~1/2.8, full size in 15K steps): the host's time per step against the step's, launches
#   splitbench  no training: the blend backward's kernel time with one block a tile (tile_split=none)
#             and four of four rows each (quarters) at 200x200 .. 1600x1600 on the first turbo run's model
#             (after it), and the forward's render time (python -m gsexp.bench) at 200 .. 1600 square
#   fastgs    + strategy=fastgs (FastGS's multi-view scores gate densification and steer pruning)
#   fastgs100, fastgs_nocap, fastgs_3dgsrule  fastgs refining every 100 steps (3DGS's) / without the
#             0.8 opacity cap / with 3DGS's clone-split rule (percent_dense 0.01, splits by the plain
#             gradient): which part of FastGS's recipe costs lego its 2.9 dB (not in RECIPES by default)
# Each run's summary goes to /tmp/peers/runs/<recipe>_r<seed>.json and its 200 test views to
# /tmp/peers/renders/<recipe>_r<seed>/, so experiments/peers/table.py prints the table.
# ~100 s a run on the H200 with its renders: 14 runs ~23 min, then ~4 min of truth calls.
set -u
W=/tmp/peers; mkdir -p $W/runs $W/renders
log() { echo "[$(date +%T)] $*" | tee -a $W/steps.log; }
SEEDS=${SEEDS:-"1 2"}
RECIPES=${RECIPES:-"fast res budget fastgs turbo turbo_free turbo15k"}
SKIP_MAIN=1 bash experiments/peers/session.sh install   # lego unpacked, gsexp built
for seed in $SEEDS; do for r in $RECIPES; do
  out=$W/runs/${r}_r$seed; [ -f $out.json ] && continue
  case $r in
    fast) args="experiment=lego_fast" ;;
    fast_quarters) args="experiment=lego_fast rasterizer.tile_split=quarters" ;;  # four blocks a tile at 800x800 too
    res) args="experiment=lego_fast schedule.resolution=auto" ;;
    budget) args="experiment=lego_fast strategy=budget strategy.options.budget_multiple=2.0" ;;
    fastgs) args="experiment=lego_fast strategy=fastgs" ;;
    fastgs100) args="experiment=lego_fast strategy=fastgs strategy.options.refine_every=100" ;;
    fastgs_nocap) args="experiment=lego_fast strategy=fastgs strategy.options.opacity_cap=1.0" ;;
    fastgs_3dgsrule) args="experiment=lego_fast strategy=fastgs strategy.options.percent_dense=0.01 strategy.options.split_absgrad_threshold=null" ;;
    turbo) args="experiment=lego_turbo" ;;
    turbo_free) args="experiment=lego_turbo schedule.resolution=auto strategy.options.follow_resolution=false" ;;
    turbo[0-9]*k*) n=${r#turbo}; args="experiment=lego_turbo iterations=${n%%k*}000"
      b=$(grep -o '_b[0-9][0-9.]*' <<< "$r"); [ -n "$b" ] && args="$args strategy.options.budget_multiple=${b#_b}"
      [[ $r == *_res* ]] && args="$args schedule.resolution=auto"
      d=$(grep -o '_d[0-9.]*' <<< "$r"); [ -n "$d" ] && args="$args schedule.max_downscale=${d#_d}"
      f=$(grep -o '_f0\.[0-9]*' <<< "$r"); [ -n "$f" ] && args="$args schedule.full_at=${f#_f}"
      [[ $r == *_nores* ]] && args="$args schedule.resolution=none"
      [[ $r == *_split* ]] && args="$args rasterizer.tile_split=auto"
      [[ $r == *_nosplit* ]] && args="$args rasterizer.tile_split=none"
      [[ $r == *_quarters* ]] && args="$args rasterizer.tile_split=quarters"
      k=$(grep -o '_bs[0-9]*' <<< "$r"); k=${k#_bs}; args="$args batch_size=${k:-1}" ;;  # one view unless _bs
    hostprof)  # not a training: is lego_turbo's step bound by the host at 1/4 size, at 1/2, at full size?
      python experiments/fast_recipes/host_profile.py experiment=lego_turbo data.path=/tmp/lego --at 100 2500 12000 \
        --out $out.json > $out.log 2>&1; log "hostprof rc=$?: $(grep -A4 '^| from step' $out.log | tail -3 | tr '\n' ' ')"
      continue ;;
    splitbench)  # not a training: the exact blend backward with one block a tile against four, on the first
      # finished turbo run's model at lego_turbo's sizes (experiments/tensor_core_backward/bench.py)
      [ -f $W/splitbench.json ] && continue  # once a session, whatever SEEDS
      model=$(ls -d $W/runs/turbo*_r*/ 2>/dev/null | head -1)
      specs=tc_gs:intersect=accutile:tile_split=none,tc_gs:intersect=accutile:tile_split=quarters
      python experiments/tensor_core_backward/bench.py --lego "$model" --biker /nonexistent \
        --sizes 200x200,283x283,400x400,800x800,1600x1600 --modes exact --views 4 --rounds 5 \
        --rasterizers $specs --out $W/splitbench.json > $W/splitbench.log 2>&1
      log "splitbench rc=$? on $model: $(grep -A12 '^| scene' $W/splitbench.log | tr '\n' ' ')"
      for size in 200 400 800 1600; do  # the forward (the matrix blend splits too): render time, same images
        python -m gsexp.bench --checkpoint "$model" --up z --width $size --height $size --num-cameras 4 \
          --rasterizers $specs --no-gsplat --json $W/splitbench_fwd_$size.json >> $W/splitbench_fwd.log 2>&1
        log "splitbench forward ${size}x$size rc=$?: $(grep -E 'tile_split=(none|quarters)' $W/splitbench_fwd.log | tail -2 | tr -s ' ' | tr '\n' ' ')"
      done
      continue ;;
    batch2) args="experiment=lego_fast batch_size=2 iterations=15000" ;;
    batch4) args="experiment=lego_fast batch_size=4 iterations=7500" ;;
    *) log "unknown recipe $r"; continue ;;
  esac
  s=$(date +%s)
  python train.py $args seed=$seed data.path=/tmp/lego logger=none hydra.run.dir=$out > $out.log 2>&1 &&
    python experiments/peers/render_views.py $out --cameras .device/lego_test_cameras.json \
      --out $W/renders/${r}_r$seed >> $out.log 2>&1 && cp $out/summary.json $out.json
  log "$r seed $seed rc=$? ($(( $(date +%s) - s )) s wall, $(python -c "import json;d=json.load(open('$out.json'));print(round(d['train_seconds'],1),'s', d['num_gaussians'])" 2>/dev/null))"
done; done
# issue 41 item 4: finished runs' steps profiled (PROFILE_RUNS, e.g. "fast_r1 batch2_r1"): the wall
# time against the kernels' sum bounds what rendering a step's views in one launch could save
for run in ${PROFILE_RUNS:-}; do
  timeout 150 python tools/profile_step.py $W/runs/$run --steps 200 > $W/profile_$run.txt 2>&1
  log "profile $run rc=$?: $(tail -1 $W/profile_$run.txt)"
done
log "recipes done"
log done   # what session.sh truth waits for
