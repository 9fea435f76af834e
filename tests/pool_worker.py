"""The GPU pool's worker for tests/test_sweep.py, in a module of its own: spawned processes import
it, and this one imports only the pool (not the dashboard and torch as test_sweep does)."""
import json
import os
import time
from pathlib import Path

from gsexp.sweep import gpu_pool


def pool_job(lock_dir, devices, out_dir, job, reps, barrier, slots=1):
    """A worker process that runs `reps` jobs, each holding a device for a moment. The barrier
    starts the workers together, so that they contend however slowly each one started."""
    barrier.wait(60)
    for r in range(reps):
        with gpu_pool.claim(lock_dir, devices, poll_s=0.01, slots=slots) as device:
            start = time.monotonic()
            time.sleep(0.2)
            Path(out_dir, f"{job}_{r}.json").write_text(json.dumps({
                "device": device, "start": start, "end": time.monotonic(), "pid": os.getpid(),
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}))
