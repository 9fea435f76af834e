"""LightGaussian's global-significance pruning, once or in rounds; the rest of the run fine-tunes."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from gsexp.compress.base import NoCompression, _steps
from gsexp.compress.significance import significance
from gsexp.gaussians import surgery
from gsexp.gaussians.params import to_gaussians
from gsexp.gaussians.sh import sh_degree_of


@dataclass
class Prune(NoCompression):
    ratio: float = 0.66      # share of the Gaussians removed in all
    beta: float = 0.1        # volume exponent of the significance
    # The step, or increasing steps, to prune at (for a 30K-step run, scaled); the remaining
    # steps fine-tune. With several, each removes the same share of what is left, so that
    # `ratio` is removed in all (LightGaussian's pruning in rounds).
    at_step: int | tuple[int, ...] = 25_000

    def __post_init__(self):
        if not 0 <= self.ratio < 1:
            raise ValueError(f"compress prune: ratio must be in [0, 1), got {self.ratio}")
        steps = self.steps()
        if not steps or any(not isinstance(s, int) or s < 1 for s in steps) or list(steps) != sorted(set(steps)):
            raise ValueError(f"compress prune: at_step must be a step >= 1 or a list of increasing steps, "
                             f"got {self.at_step!r}")

    def steps(self) -> tuple[int, ...]:
        return tuple(self.at_step) if isinstance(self.at_step, (list, tuple)) else (self.at_step,)

    def share(self) -> float:
        """The share of the remaining Gaussians each round removes."""
        rounds = len(self.steps())
        return self.ratio if rounds == 1 else 1 - (1 - self.ratio) ** (1 / rounds)

    def scaled(self, total_iterations: int) -> "Prune":
        return dataclasses.replace(self, at_step=self.scaled_at_step(total_iterations))

    def scaled_at_step(self, total_iterations: int):
        steps = sorted({_steps(s, total_iterations) for s in self.steps()})  # short runs may merge rounds
        return steps[0] if len(steps) == 1 else tuple(steps)

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        if step + 1 not in self.steps():
            return
        with torch.no_grad():
            score = significance(to_gaussians(params, sh_degree_of(1 + params["shN"].shape[1])), cameras, self.beta)
        drop = torch.zeros(len(score), dtype=torch.bool, device=score.device)
        drop[torch.argsort(score)[: int(self.share() * len(score))]] = True
        surgery.remove(params, optimizers, drop.to(params["means"].device), state)
