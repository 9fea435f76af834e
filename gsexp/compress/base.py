"""The compression interface and the variant that does nothing.

A variant is a small component the training recipe calls at fixed points:

    gaussians = compression.gaussians(params, degree)   # what is rendered
    compression.post_backward(params, state)       # after backward, before the optimizer steps
    compression.step(params, optimizers, state, step, cameras)   # after each optimizer step
    arrays = compression.finalize(params, cameras, degree, state)  # at the end: the compressed file's arrays
"""
from __future__ import annotations

from dataclasses import dataclass

from gsexp.gaussians.params import to_gaussians
from gsexp.schedule import REFERENCE_ITERATIONS


def _steps(value: int, total_iterations: int) -> int:
    """A step count written for a 30K-step run, scaled to `total_iterations` (>= 1)."""
    return max(1, round(value * total_iterations / REFERENCE_ITERATIONS))


@dataclass
class NoCompression:
    def scaled(self, total_iterations: int) -> "NoCompression":
        return self

    def setup(self, params, optimizers) -> None:
        """Add the variant's own parameters (and their optimizers)."""

    def gaussians(self, params, sh_degree: int):
        """The Gaussians to render from the parameters (differentiable)."""
        return to_gaussians(params, sh_degree)

    def regularization(self, params):
        return 0.0

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        pass

    def post_backward(self, params, state) -> None:
        """After `loss.backward()`, before the optimizer steps (e.g. hold rows fixed)."""

    def finalize(self, params, cameras, sh_degree: int, state: dict | None = None):
        """Arrays of the compressed file, or None when this variant writes none."""
        return None
