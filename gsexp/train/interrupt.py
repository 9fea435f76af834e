"""A clean stop on Ctrl+C (SIGINT), SIGTERM (SLURM's time limit, `kill`), SIGUSR1 (SLURM's
warning before preemption or the time limit, with sbatch --signal) and SIGUSR2 (the same warning
as submitit asks for it): the step under way finishes, the run checkpoints and records itself as
interrupted, and the process exits with 128 + the signal's number (train.py hands a submitit
job's warning to submitit instead, which requeues it).

The handler raises Interrupted where the program is, except inside `deferred()` (a training
step), where it waits for the step to end so the model is never caught half updated. A second
signal during a deferred step does not wait (a user pressing Ctrl+C again means now).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


class Interrupted(BaseException):
    """A signal asked the run to stop. A BaseException, as KeyboardInterrupt: `except Exception`
    (a failed run's record) does not catch it."""

    def __init__(self, signum: int, mid_step: bool = False):
        self.signum = int(signum)
        self.mid_step = mid_step  # raised inside a step: what is in memory is no model to save
        self.state: dict = {}  # where the run stands, filled in by the recipe for the summary
        super().__init__(self.name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


class _State:
    pending: int | None = None  # a signal that arrived inside a deferred step
    deferring = False


_state = _State()


def _handle(signum, frame):
    if _state.deferring and _state.pending is None:
        _state.pending = signum
        return
    raise Interrupted(signum, mid_step=_state.deferring)


def install(signals=SIGNALS) -> dict:
    """Our handler for `signals`; returns the previous handlers for restore(). Only the main
    thread may set handlers: elsewhere (a launcher's worker thread) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, _handle) for s in signals}


def restore(previous: dict) -> None:
    for s, handler in previous.items():
        # None: the handler was set outside Python (as pycolmap's); the default is the nearest
        signal.signal(s, signal.SIG_DFL if handler is None else handler)


@contextmanager
def handled(signals=SIGNALS):
    """Signals raise Interrupted inside the block; the previous handlers come back after it."""
    previous = install(signals)
    try:
        yield
    finally:
        restore(previous)
        _state.pending, _state.deferring = None, False


@contextmanager
def deferred():
    """A block a signal does not cut: Interrupted comes at its end (a no-op without handled())."""
    _state.deferring = True
    try:
        yield
    finally:
        _state.deferring = False
    if _state.pending is not None:
        signum, _state.pending = _state.pending, None
        raise Interrupted(signum)
