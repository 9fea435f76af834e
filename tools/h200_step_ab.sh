#!/usr/bin/env bash
# Issue 23's open line, a 3 M training step >= 2x the peer's: the staged preprocess kernels
# (csrc/preprocess.cu, on with GSEXP_STAGED_PREPROCESS=1) against the unstaged ones and the peer
# in one GPU session: their CUDA tests and the rasterizer's against the reference, then run.sh's
# steps at 1, 3 and 6 M for gsexp, gsexp+staged and gsplat in alternation, 2 rounds, and each
# one's kernels at 3 M (~20 min).
# Staged with `bash tools/stage_scale.sh`; collected as tools/h200_scale_session.sh:
#   source .device/env.sh; mkdir -p /tmp/sc; setsid nohup bash tools/h200_step_ab.sh > /tmp/sc/job.log 2>&1 < /dev/null &
#   bash tools/h200_scale_session.sh collect 570     # then again until "done"; packs $OUT/scale.tgz
export CHECKS="tests/test_cuda_staged_preprocess.py tests/test_cuda_rasterizer.py"  # what this change touches
export STEPS="base models train profile" SIZES="" TRAIN_SIZES="1M 3M 6M" PROFILE_SIZES="3M"
export TRAINERS="gsexp gsexp+staged gsplat" ROUNDS=2
exec bash "$(dirname "$0")"/h200_scale_session.sh
