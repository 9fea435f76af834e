"""Step counts shared by training and compression."""
from __future__ import annotations

# 3DGS's schedules are written for this many iterations; other run lengths scale them.
REFERENCE_ITERATIONS = 30_000


def sh_interval_steps(sh_degree_interval: int, batch_size: int = 1) -> int:
    """Steps between SH bands. sh_degree_interval counts training views, so k views a step raise a
    band every interval / k steps, as gsplat's steps_scaler does for its batches."""
    return max(1, round(sh_degree_interval / batch_size))
