"""Densification to a budget (Taming 3DGS, Mallick et al. 2024): the count follows a set curve."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from gsexp.train.strategy.default import DefaultStrategy, mean_absgrad


@dataclass
class BudgetStrategy(DefaultStrategy):
    """3DGS's clone / split / prune, but how many Gaussians each refine adds is set by a growth
    curve to a budget, and which ones by a score, not by a gradient threshold.

    The budget is `budget` Gaussians, or `budget_multiple` x the initial count when budget is
    None. At a refine step the target is n0 + (budget - n0) * (1 - (1 - t)^2), t the fraction of
    the refine window (refine_start..refine_stop) gone: most growth early, as Taming's curve, and
    the budget reached at refine_stop. With a resolution schedule (schedule.resolution) and
    follow_resolution, the target is also held to 1/s^(2 - t) of the growth while training at 1/s of
    the images' size (DashGaussian's primitive schedule): few Gaussians while the images are small,
    the rest as they reach full size. The refine adds target - n Gaussians (a clone adds one, a
    split split_n - 1), choosing the highest score = mean NDC gradient x opacity: where the loss
    asks for detail, weighted by what the Gaussian contributes (Taming scores with several such
    terms over views; this keeps the two that need no extra render). Pruning is 3DGS's, so the
    count can end below the budget; it never ends above it.
    """

    budget: int | None = None
    budget_multiple: float = 2.5
    follow_resolution: bool = True
    # step -> the training images' divisor (schedule.resolution), set by the trainer; None: full size
    downscale_at: Callable[[int], float] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        super().__post_init__()
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"BudgetStrategy: budget must be >= 1 Gaussians, got {self.budget}")
        if self.budget is None and not self.budget_multiple > 0:
            raise ValueError(f"BudgetStrategy: budget_multiple must be > 0, got {self.budget_multiple}")

    def initial_state(self) -> dict:
        return {**super().initial_state(), "n_initial": 0}

    def target(self, step: int, n_initial: int) -> int:
        """The count the refine at `step` grows to."""
        budget = self.budget if self.budget is not None else round(self.budget_multiple * n_initial)
        span = max(self.refine_stop - self.refine_start, 1)
        t = min(max((step - self.refine_start) / span, 0.0), 1.0)
        share = 1 - (1 - t) ** 2
        if self.follow_resolution and self.downscale_at is not None:
            # DashGaussian's primitive schedule: training at 1/s of the size, at most 1/s^(2 - t) of
            # the growth, so the count rises with the resolution instead of before it
            share = min(share, self.downscale_at(step) ** -(2 - t))
        return max(n_initial, round(n_initial + (budget - n_initial) * share))

    def to_refine(self, params: dict, state: dict, grads, small, step: int) -> torch.Tensor:
        if not state.get("n_initial"):  # the count the run started with (kept in checkpoints)
            state["n_initial"] = len(grads)
        room = self.target(step, state["n_initial"]) - len(grads)
        if self.absgrad:  # the score's gradient is AbsGS's statistic
            grads = mean_absgrad(state)
        score = torch.where(state["count"] > 0, grads * torch.sigmoid(params["opacity_logits"].detach()), 0.0)
        if room <= 0:
            return torch.zeros_like(score, dtype=torch.bool)
        return self._best_within(score > 0, score, small, room)
