#!/usr/bin/env bash
# A later GPU session of the peer study (issue 36) as one background job, after
# `bash experiments/peers/stage.sh train` and `... truth` here:
#   carry .device:  source .device/env.sh; setsid nohup bash experiments/peers/session2.sh > /tmp/peers.log 2>&1 < /dev/null & bash experiments/peers/session.sh wait 560 "all done"
#   then waits as session.sh's (MARK "all done"), then its three truth calls.
# Lego round 2 of gsexp (with the GPU tests in TESTS beside the builds), the render tables against
# gsplat main from that lego (render_session.sh, VERSIONS), then round 2 of the gsplat rows.
# ~20 min of H100 time without the truth calls.
set -u
export ROUND_LIST=${ROUND_LIST:-2}
TESTS=${TESTS:-tests/test_cuda_absgrad.py} TRAINERS=gsexp bash experiments/peers/session.sh run
VERSIONS=${VERSIONS:-main} bash experiments/peers/render_session.sh
SKIP_TESTS=1 bash experiments/peers/session.sh run
echo "[$(date +%T)] all done" >> /tmp/peers/steps.log
