"""Hydra callback: before a multirun, share the GPU pool with the jobs; after it, write the
sweep's results.csv and results.md (configured in conf/hydra/default.yaml)."""
from __future__ import annotations

import os
from pathlib import Path

from hydra.experimental.callback import Callback

from gsexp.sweep import gpu_pool
from gsexp.sweep.results import summarize


class SweepSummary(Callback):
    def on_multirun_start(self, config, **kwargs) -> None:
        # Parallel local jobs (joblib) share the GPUs through the pool; the list is made here,
        # in the launching process, before any worker starts. SLURM assigns GPUs itself.
        if str(config.hydra.launcher.get("_target_", "")).endswith(("JoblibLauncher", "GpuPoolLauncher")):
            os.environ.setdefault(gpu_pool.POOL_ENV, ",".join(gpu_pool.visible_devices()))

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        rows = summarize(sweep_dir)
        ok = sum(r["status"] == "ok" for r in rows)
        print(f"[gsexp] sweep {sweep_dir}: {ok}/{len(rows)} jobs ok; results.csv and results.md written "
              f"(python -m gsexp.dashboard {sweep_dir})")
