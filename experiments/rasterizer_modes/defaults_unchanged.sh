#!/usr/bin/env bash
# Issue 38's acceptance "defaults render bit-identically to before", side by side on one GPU: the
# source from before the modes (260dd86^, the parent of their first commit) against the checkout.
#   here:  bash experiments/rasterizer_modes/defaults_unchanged.sh stage     # -> $S/modes_before.tgz (~0.2 MB)
#   GPU:   PLY=<a trained scene> bash experiments/rasterizer_modes/defaults_unchanged.sh run   # ~1 min a round (two builds)
#          RUN=<its run dir> bash experiments/rasterizer_modes/defaults_unchanged.sh step   # after run (its builds)
# ($S: the staged folder, .device_modes by default; session.sh runs it after its first lego model.)
# run: both versions render the same seeded scenes (and the PLY) with every variant x intersect x
# backward, modes off, in alternating processes ($ROUNDS rounds, 3 by default), times a tc_gs
# render + backward of the PLY in each, and compares; the table goes to $OUT/defaults_unchanged.txt;
# then preprocess_ab.py (the preprocess kernels alone, old against new) -> $OUT/preprocess_ab.txt.
# step: tools/profile_step.py on the run's checkpoint at lego_fast's full size, before and after
# alternately ($ROUNDS each; step_ab.py gives the old version a config it accepts) -> $OUT/step_ab.txt.
set -euo pipefail
BEFORE=${BEFORE:-260dd86^}
S=${S:-.device_modes}
PY=experiments/rasterizer_modes/defaults_unchanged.py
case "${1:-}" in
stage) git archive --format=tar.gz -o $S/modes_before.tgz "$BEFORE" csrc gsexp conf && ls -la $S/modes_before.tgz ;;
run)
  rm -rf /tmp/modes_before && mkdir -p /tmp/modes_before "${OUT:-/tmp/out}"
  tar xzf $S/modes_before.tgz -C /tmp/modes_before
  ply=${PLY:?PLY: the trained scene to render and time}
  files=()
  for round in $(seq "${ROUNDS:-3}"); do  # alternating, so the timing pairs share the machine's state
    PYTHONPATH=/tmp/modes_before:${PYTHONPATH:-} GSEXP_BUILD_DIR=/tmp/build_before python $PY render /tmp/before_$round.pt --ply $ply --time
    python $PY render /tmp/after_$round.pt --ply $ply --time
    files+=(/tmp/before_$round.pt /tmp/after_$round.pt)
  done
  rc=0
  python $PY compare "${files[@]}" | tee "${OUT:-/tmp/out}"/defaults_unchanged.txt || rc=$?
  # the preprocess alone, old against new, on fixed upstream gradients (no atomics): bit for bit?
  python experiments/rasterizer_modes/preprocess_ab.py --before /tmp/modes_before --ply $ply \
    > "${OUT:-/tmp/out}"/preprocess_ab.txt 2>&1 || true
  exit $rc ;;
step)
  run=${RUN:?RUN: the lego run dir whose checkpoint both versions train on from}
  rm -rf /tmp/step_before
  PYTHONPATH=/tmp/modes_before:${PYTHONPATH:-} python experiments/rasterizer_modes/step_ab.py config \
    "$run" /tmp/modes_before/conf /tmp/step_before
  for round in $(seq "${ROUNDS:-3}"); do
    echo "== before, round $round"
    PYTHONPATH=/tmp/modes_before:${PYTHONPATH:-} GSEXP_BUILD_DIR=/tmp/build_before \
      python tools/profile_step.py /tmp/step_before --steps 200 --top 5 --set data.downscale=1
    echo "== after, round $round"
    python tools/profile_step.py "$run" --steps 200 --top 5 --set data.downscale=1
  done 2>&1 | tee "${OUT:-/tmp/out}"/step_ab.txt | grep -E "^==|wall" ;;
*) sed -n 2,8p "$0"; exit 2 ;;
esac
