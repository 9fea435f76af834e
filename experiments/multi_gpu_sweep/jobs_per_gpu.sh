#!/usr/bin/env bash
# Several sweep jobs per GPU (issue 39) on one GPU, staged as the peer study
# (`bash experiments/peers/stage.sh train`: lego and the wheels in .device):
#   carry .device:  source .device/env.sh; setsid nohup bash experiments/multi_gpu_sweep/jobs_per_gpu.sh > /tmp/jpg.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "jobs per gpu done"
#   then waits with the same MARK; each call brings back /tmp/peers (session.sh pack), where
#   this writes jpg/ (every job's summary.json, the sweeps' results) and jpg/table.md.
# The same 12-cell sweep (lego_fast at 10K steps: rasterizer vanilla / tc_gs x 6 seeds) with
# hydra.launcher.jobs_per_gpu = k for each k in KS: wall time, cells per hour, each job's training
# time, PSNR, peak memory and start-up / end overhead. ~15 min on the H200 for k = 1..4 (SEEDS=0,1,2 and
# ITERS=5000: a quarter of that); MPS_KS
# adds the same sweeps under CUDA MPS (below).
set -u
W=/tmp/peers; J=$W/jpg; mkdir -p $J
log() { echo "[$(date +%T)] $*" | tee -a $W/steps.log; }
# sweep <folder name> <k>: the 12 cells with k jobs a GPU, into $J/<folder name> (kept if done)
sweep() {
  [ -f $J/$1/results.csv ] && return
  local s=$(date +%s)
  python train.py -m experiment=lego_fast hydra/launcher=gpus hydra.launcher.jobs_per_gpu=$2 data.path=/tmp/lego \
    logger=none iterations=${ITERS:-10000} rasterizer=vanilla,tc_gs rasterizer.intersect=accutile seed=${SEEDS:-0,1,2,3,4,5} \
    hydra.sweep.dir=$J/$1 > $J/$1.log 2>&1
  log "$1: jobs_per_gpu=$2 rc=$? ($(( $(date +%s) - s )) s wall)"
}
SKIP_MAIN=1 bash experiments/peers/session.sh install   # lego unpacked, gsexp built
# first (~1.5 min): a 3-job pool sweep and the pair budget (if either fails on this GPU, say so instead of timing
# failures) and a GPU run's resume (logged only)
if ! python -m pytest -q tests/test_cuda_sweep.py tests/test_pairs.py > $J/gpu_tests.log 2>&1; then
  log "test_cuda_sweep / test_pairs failed: $(tail -1 $J/gpu_tests.log)"; log "jobs per gpu done"; exit 1
fi
log "test_cuda_sweep + test_pairs: $(tail -1 $J/gpu_tests.log)"
if [ "${RESUME_TEST:-1}" = 1 ]; then   # RESUME_TEST=0 when the session's GPU time is short
  python -m pytest -q tests/test_cuda_resume.py > $J/gpu_tests_resume.log 2>&1
  log "test_cuda_resume: $(tail -1 $J/gpu_tests_resume.log)"
fi
for k in ${KS:-1 2 3 4}; do sweep k$k $k; done
# CUDA MPS (opt-in: MPS_KS="2 4"): the same sweeps with the jobs' kernels sharing the GPU through
# one MPS server instead of time-slicing between contexts. A user-space daemon, stopped after; the
# GPU's own settings are left as they are. Skipped, and said so, where nvidia-cuda-mps-control is absent.
if [ -n "${MPS_KS:-}" ]; then
  if command -v nvidia-cuda-mps-control > /dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    nvidia-cuda-mps-control -d; log "mps start rc=$?"
    for k in $MPS_KS; do sweep mps_k$k $k; done
    echo quit | nvidia-cuda-mps-control; log "mps stop rc=$?"
  else
    log "mps: nvidia-cuda-mps-control not found, skipped"
  fi
fi
find $J -name "*.pt" -delete; find $J -name "point_cloud.ply" -delete
python experiments/multi_gpu_sweep/jobs_per_gpu_table.py $J | tee $J/table.md
log "jobs per gpu done"
