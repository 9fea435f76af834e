#!/usr/bin/env bash
# Stages .device for experiments/scale/h200_scale_session.sh and experiments/scale/h200_step_ab.sh (issue 23): lego's
# train split and every 8th test view as lossless WebP (unpacked to PNG there), the wheels the
# runs import and gsplat 1.5.3's for the peer; no LPIPS weights (the base run skips LPIPS).
# Send it with `carry: [".device"]`; the command starts with `source .device/env.sh;`.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -e .device ]; then echo "stage_scale.sh: .device exists: move it aside (or remove it) first" >&2; exit 1; fi
python ../shared/tools/stage_gpu_job.py --peer --scene nerf_synthetic/lego --test-every 8 > /dev/null
python experiments/webp_stage.py pack .device/data/lego .device/lego_webp
rm -rf .device/data .device/whl/hydra_joblib_launcher-*.whl  # PNGs packed; no sweeps there
du -sh .device
