"""Where a training step's time goes: render, loss, backward, densify, optimizer.

On a GPU each timed step records CUDA events between phases; they are read when a later
timed step asks (by then they have completed), so measuring never blocks the CPU. On a CPU
the phases are wall time. Beside them, the host's time to issue a timed step (`host_ms`, less
its waits for pair counts; a sync elsewhere in the step, such as an exact count after a refine,
still counts): where it nears the phases' sum, the step is bound by the host's launches, and a
smaller step (fewer pixels or Gaussians) does not run faster."""
from __future__ import annotations

import statistics
import time

import torch

PHASES = ("render", "loss", "backward", "densify", "optimizer")


class PhaseTimer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.active = False
        self.marks: list = []     # (phase, event or time) of the step being timed
        self.pending: list = []   # finished steps' marks, not read yet
        self.history: dict[str, list[float]] = {p: [] for p in PHASES}
        self.host: list[float] = []  # ms the host took to issue each timed step, less its waits
        self.host_start = 0.0

    def _now(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def begin(self, active: bool) -> None:
        """Start a step; only an active one is timed."""
        self.active = active
        self.marks = [("", self._now())] if active else []
        self.host_start = time.perf_counter()

    def mark(self, phase: str) -> None:
        """The time since the last mark belongs to `phase` (phases may recur: they add up)."""
        if self.active:
            self.marks.append((phase, self._now()))

    def end(self, waited_s: float = 0.0) -> None:
        """waited_s: what of the step the host spent waiting for pair counts (not issuing work)."""
        if self.active:
            self.pending.append(self.marks)
            self.host.append((time.perf_counter() - self.host_start - waited_s) * 1e3)
        self.active, self.marks = False, []

    def read(self) -> dict[str, float] | None:
        """The newest finished step's ms per phase, if its events have completed (else None)."""
        done = [m for m in self.pending if not self.cuda or m[-1][1].query()]
        if not done:
            return None
        self.pending = [m for m in self.pending if m not in done]
        for marks in done:
            ms = {p: 0.0 for p in PHASES}
            for (_, a), (phase, b) in zip(marks, marks[1:]):
                ms[phase] += a.elapsed_time(b) if self.cuda else (b - a) * 1e3
            for p in PHASES:
                self.history[p].append(ms[p])
        return ms

    def medians(self) -> dict[str, float]:
        return {p: statistics.median(v) for p, v in self.history.items() if v}

    def host_ms(self) -> dict[str, float]:
        return {"median": statistics.median(self.host), "mean": statistics.fmean(self.host)} if self.host else {}

    def means(self) -> dict[str, float]:
        """Steps x these approximate the loop's time where the step changes over the run (a
        resolution schedule's small early steps); the sum of the medians does not."""
        return {p: statistics.fmean(v) for p, v in self.history.items() if v}
