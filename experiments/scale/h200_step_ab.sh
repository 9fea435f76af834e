#!/usr/bin/env bash
# Issue 23's open line, a 3 M training step >= 2x the peer's, after the preprocess backward went
# through shared memory (csrc/preprocess.cu): its CUDA tests and the rasterizer's against the
# reference, then run.sh's steps at 3 and 6 M for gsexp and gsplat in alternation, 2 rounds
# (~11 min).
# Staged with `bash experiments/scale/stage_scale.sh`; collected as experiments/scale/h200_scale_session.sh:
#   source .device/env.sh; mkdir -p /tmp/sc; setsid nohup bash experiments/scale/h200_step_ab.sh > /tmp/sc/job.log 2>&1 < /dev/null &
#   bash experiments/scale/h200_scale_session.sh collect 570     # then again until "done"; packs $OUT/scale.tgz
export CHECKS="tests/test_cuda_preprocess_backward.py tests/test_cuda_rasterizer.py"  # what this change touches
export STEPS="base models train" SIZES="" TRAIN_SIZES="3M 6M" ROUNDS=2
exec bash "$(dirname "$0")"/h200_scale_session.sh
