"""hydra/launcher=gpus (conf/hydra/launcher/gpus.yaml): Hydra's joblib launcher whose jobs share
the GPU pool (gsexp/sweep/gpu_pool.py), `jobs_per_gpu` of them at once on each GPU. A Hydra
plugin lives in the hydra_plugins package; this one only hands jobs_per_gpu to the pool."""
from __future__ import annotations

import os
import sys
from typing import Any

from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

from gsexp.sweep import gpu_pool


class GpuPoolLauncher(JoblibLauncher):
    def __init__(self, jobs_per_gpu: int = 1, **joblib: Any) -> None:
        if not isinstance(jobs_per_gpu, int) or jobs_per_gpu < 1:
            # A user error: one line and exit 2 (SystemExit passes through Hydra's error wrapping).
            print(f"[gsexp] error: hydra.launcher.jobs_per_gpu={jobs_per_gpu}: the jobs to run at once on each GPU "
                  "must be an integer >= 1 (e.g. hydra.launcher.jobs_per_gpu=2)", file=sys.stderr)
            raise SystemExit(2)
        os.environ[gpu_pool.SLOTS_ENV] = str(jobs_per_gpu)  # the workers inherit it
        super().__init__(**joblib)
