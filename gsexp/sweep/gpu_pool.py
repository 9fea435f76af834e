"""GPUs for parallel sweeps (hydra/launcher=gpus): a job claims one of a device's k slots
(hydra.launcher.jobs_per_gpu, default 1) with a lock file in the sweep directory and holds it
until the job ends, so at most k running jobs share a GPU. The claimed device is what
CUDA_VISIBLE_DEVICES shows the job.

A worker process serves many jobs, and CUDA reads CUDA_VISIBLE_DEVICES once per process: so a
worker is pinned to the GPU of its first job and later claims only that one."""
from __future__ import annotations

import fcntl
import itertools
import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

POOL_ENV = "GSEXP_GPU_POOL"      # comma-separated device ids, set by the sweep callback
PINNED_ENV = "GSEXP_PINNED_GPU"  # this process's device, once it has one
SLOTS_ENV = "GSEXP_JOBS_PER_GPU"  # jobs that may run at once on one device, set by the gpus launcher


def visible_devices() -> list[str]:
    """Device ids this process may use: CUDA_VISIBLE_DEVICES, else every GPU torch sees."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []


def pool() -> list[str]:
    return [d for d in os.environ.get(POOL_ENV, "").split(",") if d]


def jobs_per_gpu() -> int:
    return int(os.environ.get(SLOTS_ENV) or 1)


@contextmanager
def claim(lock_dir, devices: list[str] | None = None, poll_s: float = 0.2, slots: int | None = None):
    """Hold one of the `slots` (default: jobs_per_gpu()) of a device of `devices` (default: the
    sweep's pool) for the duration of the block; yields the device's id, or None when there are
    no devices (CPU jobs). Free devices fill before a second job joins one."""
    devices = pool() if devices is None else devices
    slots = jobs_per_gpu() if slots is None else slots
    pinned = os.environ.get(PINNED_ENV)
    candidates = [pinned] if pinned else devices
    if not candidates:
        yield None
        return
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    while True:
        for slot, device in itertools.product(range(slots), candidates):
            handle = open(lock_dir / f"gpu_{device}.{slot}.lock", "a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                handle.seek(0)
                handle.truncate()
                handle.write(f"pid {os.getpid()}\n")
                handle.flush()
                if not pinned:
                    _check_cuda_untouched()
                    os.environ["CUDA_VISIBLE_DEVICES"] = device
                    os.environ[PINNED_ENV] = device
                yield device
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        time.sleep(poll_s)


def _check_cuda_untouched() -> None:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise RuntimeError("gpu_pool.claim: CUDA was initialised before the job claimed its GPU, so "
                           "CUDA_VISIBLE_DEVICES can no longer select it; claim before any CUDA call")


def nvidia_smi_record(device: str) -> dict:
    """What nvidia-smi says about this job, for the sweep's no-sharing check: the UUID of the
    claimed GPU (a physical index) and the GPUs on which this process holds a context. Call it
    while the job still holds CUDA; empty values where nvidia-smi is missing."""
    def query(*args) -> list[str]:
        try:
            out = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []

    uuid = query("--query-gpu=uuid", "-i", str(device))
    apps = query("--query-compute-apps=pid,gpu_uuid")
    mine = sorted({line.split(",")[1].strip() for line in apps if line.split(",")[0].strip() == str(os.getpid())})
    return {"gpu_uuid": uuid[0] if uuid else None, "gpu_seen": mine}
