"""Pair-buffer capacities for the CUDA rasterizer, so that a training step never waits for the
pair count (the one host sync of a render) and the CPU can run ahead of the GPU.

The capacity is the largest count of the last WINDOW renders times MARGIN. Counts come back
through pinned memory and are read once their copy has completed. A step after densification
changed the number of Gaussians renders with the count read back (exact), as does every step
until a count is known. A render whose count exceeded its capacity dropped pairs: it is
counted in `overflows` (summary.json) and warned about, and the margin grows.

The CPU may run at most MAX_AHEAD renders ahead of the newest known count: on a GPU shared by
several jobs (or a slow one) it would otherwise size hundreds of renders from counts that old,
while the scene grows. Waiting for the render MAX_AHEAD back leaves the GPU that much queued work,
so it does not idle. The margin grows once per capacity that overflowed, not once per render
that used it (runs of overflows from stale capacities once took it from 1.25 to 365)."""
from __future__ import annotations

import collections
import time
import warnings

import torch

WINDOW = 256   # renders the capacity looks back over (more than a pass over most scenes' views)
MARGIN = 1.25
MAX_AHEAD = 4  # renders whose counts may be on their way when the next capacity is set


class PairBudget:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.counts = collections.deque(maxlen=WINDOW)
        self.margin = MARGIN
        self.pending = []  # (pinned count, event, capacity used, margin it used)
        self.overflows = 0
        self.waited_s = 0.0  # the host's time waiting for counts (MAX_AHEAD), for PhaseTimer's host_ms
        self.slots = self.pairs = 0  # capacities and counts summed over the renders that used a capacity

    def capacity(self, exact: bool) -> int | None:
        """The capacity for the next render, or None to read its count back (exact)."""
        self._poll()
        if len(self.pending) >= MAX_AHEAD:  # too far ahead: wait for the oldest count on its way
            start = time.perf_counter()
            self.pending[-MAX_AHEAD][1].synchronize()
            self.waited_s += time.perf_counter() - start
            self._poll()
        if not self.enabled or exact or not self.counts:
            return None
        return int(max(self.counts) * self.margin) + 1024

    def record(self, num_pairs, capacity: int | None) -> None:
        if capacity is None:
            self.counts.append(int(num_pairs))
            return
        host = torch.empty(1, dtype=torch.int64, pin_memory=True)
        host.copy_(num_pairs.reshape(1), non_blocking=True)
        event = torch.cuda.Event(blocking=True)  # a wait for it sleeps instead of spinning a core
        event.record()
        self.pending.append((host, event, capacity, self.margin))

    def settled_overflows(self) -> int:
        """`overflows`, counting the renders whose counts are still on their way (waits for them):
        for a summary at the end, not for the loop."""
        for _, event, *_ in self.pending:
            event.synchronize()
        self._poll()
        return self.overflows

    def padding(self) -> float | None:
        """Buffer slots per pair over the renders that used a capacity: the sort, the key fill
        and the tile ranges run over every slot, so this is their work against an exact count's."""
        return self.slots / self.pairs if self.pairs else None

    def _poll(self) -> None:
        while self.pending and self.pending[0][1].query():
            host, _, capacity, margin = self.pending.pop(0)
            count = int(host.item())  # already in host memory: no sync
            self.counts.append(count)
            self.slots += capacity
            self.pairs += count
            if count > capacity:
                self.overflows += 1
                self.margin = max(self.margin, margin * 1.5)
                warnings.warn(f"a training render had {count} (tile, Gaussian) pairs for a capacity of {capacity}: "
                              f"it dropped {count - capacity}; the margin is now {self.margin:.2f}")
