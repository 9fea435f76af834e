"""Step counts shared by training and compression."""
from __future__ import annotations

# 3DGS's schedules are written for this many iterations; other run lengths scale them.
REFERENCE_ITERATIONS = 30_000
