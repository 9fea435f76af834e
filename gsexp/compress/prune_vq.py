"""Pruning, then vector quantisation of what is left (LightGaussian's pipeline)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gsexp.compress.prune import Prune
from gsexp.compress.vq import VectorQuantize


@dataclass
class PruneVQ(Prune):
    codes: int = 8192
    fraction: float = 0.6
    iterations: int = 10
    position_bits: int = 32
    vq_step: int | None = None

    def __post_init__(self):
        super().__post_init__()
        self.vq()  # its checks, before training
        if self.vq_step is not None and self.vq_step <= max(self.steps()):
            raise ValueError(f"compress prune_vq: vq_step ({self.vq_step}) must come after the last prune "
                             f"(at_step {self.at_step})")

    def vq(self) -> VectorQuantize:
        return VectorQuantize(self.codes, self.fraction, self.beta, self.iterations, self.position_bits,
                              self.vq_step)

    def scaled(self, total_iterations: int) -> "PruneVQ":
        return dataclasses.replace(self, at_step=self.scaled_at_step(total_iterations),
                                   vq_step=self.vq().scaled(total_iterations).vq_step)

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        super().step(params, optimizers, state, step, cameras)
        self.vq().step(params, optimizers, state, step, cameras)

    def post_backward(self, params, state) -> None:
        self.vq().post_backward(params, state)

    def finalize(self, params, cameras, sh_degree: int, state: dict | None = None):
        return self.vq().finalize(params, cameras, sh_degree, state)
