#!/usr/bin/env bash
# backward=exact_cull on one GPU session (~10 min; staged as the peer study's lego: `bash
# experiments/peers/stage.sh train`), as one background job:
#   carry .device: source .device/env.sh; setsid nohup bash experiments/tensor_core_backward/cull_session.sh > /tmp/cull.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "cull done"
#   then:          source .device/env.sh; bash experiments/peers/session.sh wait 580 "cull done"
# 1. the GPU tests: exact_cull against exact (tests/test_cuda_backward_cull.py), the files whose
#    kernels share its source (absgrad, depth, the GEMM backward, no host syncs in a step, fastgs
#    among them) and the masked hit counts strategy=fastgs counts with;
# 2. lego 30K with experiment=lego_fast, ROUNDS rounds alternating backward=exact and exact_cull
#    (train_seconds, PSNR on every 8th test view, phase_ms: the backward's share of a step);
# 3. bench.py on the last exact_cull model and biker: the blend-backward kernel alone, exact
#    against exact_cull and both walks (the probe), 800x800 and 1920x1080, interleaved rounds.
set -u
W=/tmp/peers/cull; mkdir -p $W/runs   # under /tmp/peers: session.sh wait packs it into peers.tgz
log() { echo "[$(date +%T)] $*" | tee -a /tmp/peers/steps.log; }
ROUNDS=${ROUNDS:-1}
log start
[ -d /tmp/lego ] || python experiments/webp_stage.py unpack .device/lego_webp /tmp/lego > $W/unpack.log 2>&1
python -c "from gsexp.render.cuda import build; build.load()" > $W/build.log 2>&1; log "build rc=$?"
export GSEXP_SHARED=${GSEXP_SHARED:-$W/shared}
mkdir -p $W/shared/data/scenes && cp -n .device/biker.compressed.ply $W/shared/data/scenes/ 2>/dev/null
timeout 420 python -m pytest -q tests/test_cuda_backward_cull.py tests/test_cuda_absgrad.py tests/test_cuda_depth.py \
  tests/test_cuda_gemm_backward.py tests/test_cuda_step_sync.py tests/test_cuda_build.py \
  "tests/test_cuda_rasterizer.py::test_masked_hit_counts_match_reference" > $W/gpu_tests.log 2>&1
log "gpu tests rc=$? ($(tail -n 1 $W/gpu_tests.log))"
for r in $(seq "$ROUNDS"); do for b in exact exact_cull; do
  name=${b}_r$r; s=$(date +%s)
  python train.py experiment=lego_fast data.path=/tmp/lego rasterizer.backward=$b logger=none eval_lpips=false \
    hydra.run.dir=$W/runs/$name > $W/runs/$name.log 2>&1
  log "train $name rc=$? ($(( $(date +%s) - s )) s wall)"
done; done
python - "$W" <<'EOF' | tee $W/train_table.md
import json, pathlib, sys
print("| run | train s | PSNR | Gaussians | backward ms/step | step ms (render+loss+backward+optimizer) |")
print("|---|---:|---:|---:|---:|---:|")
for f in sorted(pathlib.Path(sys.argv[1], "runs").glob("*/summary.json")):
    d = json.loads(f.read_text()); ph = d.get("phase_ms") or {}
    print(f"| {f.parent.name} | {d.get('train_seconds', 0):.1f} | {d.get('psnr', 0):.2f} | {d.get('num_gaussians', 0):,} "
          f"| {ph.get('backward', 0):.3f} | {sum(ph.values()):.3f} |")
EOF
LEGO=$(ls -d $W/runs/exact_cull_r*/ 2>/dev/null | tail -1)
python experiments/tensor_core_backward/bench.py --lego "$LEGO" --biker $W/shared/data/scenes/biker.compressed.ply \
  --sizes ${BENCH_SIZES:-800x800,1920x1080} --modes exact,exact_cull,exact@walk,exact_cull@walk --rounds ${BENCH_ROUNDS:-5} \
  --out $W/bench_cull.json > $W/bench_cull.log 2>&1
log "bench rc=$? ($(tail -n 3 $W/bench_cull.log | tr '\n' ' '))"
log "cull done"
