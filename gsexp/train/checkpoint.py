"""Crash-safe checkpoints in run_dir/checkpoints/step_XXXXXX.pt, loadable with weights_only=True,
and RNG state in a form such checkpoints can hold.

A file under a step_*.pt name is always complete: it is written under a temporary name, synced
to disk, then renamed. Only one process should save into a run folder at a time."""
from __future__ import annotations

import os
import random
import re
import tempfile
from pathlib import Path

import numpy as np
import torch

_NAME = re.compile(r"step_(\d+)\.pt")


def _checkpoints(run_dir) -> list[tuple[int, Path]]:
    """Complete checkpoints as (step, path), lowest step first."""
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.fullmatch(p.name))]
    return sorted(found)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not possible on every platform (e.g. Windows).
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_weights_only(tmp: str) -> None:
    """Refuse, at save time, a payload that torch.load(weights_only=True) would refuse at resume."""
    find_unsafe = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)  # torch >= 2.5
    unsafe = find_unsafe(tmp) if find_unsafe else []
    if unsafe:
        raise TypeError(f"checkpoint payload holds types weights_only loading refuses: {unsafe}; "
                        "store tensors, dicts, lists, str/int/float/bool/None only")


def save_checkpoint(run_dir, step: int, payload: dict, *, keep_last: int | None = 3) -> Path:
    """Write run_dir/checkpoints/step_{step:06d}.pt atomically; then, if keep_last is set, delete
    all but the keep_last highest steps (never the file just written)."""
    if keep_last is not None and keep_last < 1:
        raise ValueError(f"keep_last must be >= 1 or None, got {keep_last}")
    folder = Path(run_dir) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"step_{int(step):06d}.pt"
    # Dot-prefixed temp name in the same folder: same filesystem (so os.replace is atomic) and
    # never matched as a checkpoint.
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{final.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        _check_weights_only(tmp)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(folder)
    if keep_last is not None:
        old = [p for _, p in _checkpoints(run_dir) if p != final]
        for p in old[:max(len(old) - (keep_last - 1), 0)]:
            p.unlink(missing_ok=True)
    # Temp files left by a process that was killed mid-save.
    for p in folder.glob(".step_*.tmp"):
        p.unlink(missing_ok=True)
    return final


def latest_checkpoint(run_dir) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    found = _checkpoints(run_dir)
    return found[-1][1] if found else None


def load_checkpoint(path) -> dict:
    """Load on the CPU with weights_only=True; a corrupt file raises ValueError naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"ply\n" or path.suffix.lower() in (".ply", ".splat", ".npz"):
        raise ValueError(f"{path} is a model file, not a gsexp checkpoint (a run's checkpoints/step_*.pt); to "
                         f"start training from it, use model.init=ply model.ply={path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        first_line = (str(e).splitlines() or [""])[0]
        raise ValueError(
            f"cannot load checkpoint {path}: corrupt, truncated or not weights_only-loadable "
            f"({type(e).__name__}: {first_line}). Delete it, or resume from an older checkpoint "
            f"in {path.parent}.") from e


def rng_state() -> dict:
    """Python, numpy (global) and torch CPU RNG states as tensors, lists and ints, and the CUDA
    ones once CUDA has started (before, they hold only torch.manual_seed's queued seed)."""
    version, internal, gauss_next = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": {"version": version, "state": list(internal), "gauss_next": gauss_next},
        "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_initialized():  # reading them would start CUDA (a sweep job claims its GPU after this)
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what rng_state() captured. CUDA states are restored for the devices present."""
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss_next"]))
    npst = state["numpy"]
    np.random.set_state((npst["name"], npst["keys"].numpy().astype(np.uint32), npst["pos"],
                         npst["has_gauss"], npst["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        for i, s in enumerate(state["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s, i)
