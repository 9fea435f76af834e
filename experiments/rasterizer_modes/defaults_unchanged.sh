#!/usr/bin/env bash
# Issue 38's acceptance "defaults render bit-identically to before", side by side on one GPU: the
# source from before the modes (260dd86^, the parent of their first commit) against the checkout.
#   here:  bash experiments/rasterizer_modes/defaults_unchanged.sh stage     # -> $S/modes_before.tgz (~0.2 MB)
#   GPU:   PLY=<a trained scene> bash experiments/rasterizer_modes/defaults_unchanged.sh run   # ~4 min (two builds)
# ($S: the staged folder, .device_modes by default; session.sh runs it after its first lego model.)
# run: both versions render the same seeded scenes (and the PLY) with every variant x intersect x
# backward, modes off, in alternating processes, times a tc_gs render + backward of the PLY in
# each, and compares; the table goes to $OUT/defaults_unchanged.txt.
set -euo pipefail
BEFORE=${BEFORE:-260dd86^}
S=${S:-.device_modes}
PY=experiments/rasterizer_modes/defaults_unchanged.py
case "${1:-}" in
stage) git archive --format=tar.gz -o $S/modes_before.tgz "$BEFORE" csrc gsexp && ls -la $S/modes_before.tgz ;;
run)
  rm -rf /tmp/modes_before && mkdir -p /tmp/modes_before "${OUT:-/tmp/out}"
  tar xzf $S/modes_before.tgz -C /tmp/modes_before
  ply=${PLY:?PLY: the trained scene to render and time}
  for round in 1 2; do  # alternating, so the timing pairs share the machine's state
    PYTHONPATH=/tmp/modes_before:${PYTHONPATH:-} GSEXP_BUILD_DIR=/tmp/build_before python $PY render /tmp/before_$round.pt --ply $ply --time
    python $PY render /tmp/after_$round.pt --ply $ply --time
  done
  python $PY compare /tmp/before_1.pt /tmp/after_1.pt /tmp/before_2.pt /tmp/after_2.pt | tee "${OUT:-/tmp/out}"/defaults_unchanged.txt ;;
*) sed -n 2,8p "$0"; exit 2 ;;
esac
