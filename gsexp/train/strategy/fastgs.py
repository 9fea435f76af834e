"""Multi-view consistent densification and pruning (FastGS, Ren et al. 2026).

3DGS grows a Gaussian when its gradient is large in the views it happened to be trained on.
FastGS also asks the other views: at each refine it renders `views` training views, marks in
each the pixels whose L1 error, min-max normalised over the image, exceeds `error_threshold`,
and counts per Gaussian the marked pixels it contributes to (hit_counts with a pixel mask).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar

import torch

from gsexp.gaussians import surgery
from gsexp.train.strategy.default import DefaultStrategy, mean_absgrad, split_by_absgrad

# (k, seed) -> (marked-pixel counts summed over k views [N], the same weighted by each view's loss [N])
Scorer = Callable[[int, int], tuple]


@dataclass
class FastGSStrategy(DefaultStrategy):
    """3DGS's refine (DefaultStrategy) with FastGS's multi-view scores.

    At each refine: scores from `views` sampled training views (the trainer's view_scorer; see the
    module docstring). The importance of a Gaussian is its marked-pixel count per view, floored
    (FastGS's integer division); the prune score is the count weighted by each view's photometric
    loss, min-max normalised over the Gaussians. Then:
    - densify: the clone / split candidates of 3DGS's gradient rule that also have importance
      > min_importance (regions that several views get wrong);
    - prune: of 3DGS's prune candidates (faint, or huge once past the first reset), prune_share of
      their number is sampled over all Gaussians with weight 1 / (1 - prune score), and the
      candidates among them go (FastGS's budgeted pruning; prune_share 1.0: every candidate);
    - opacities are capped at opacity_cap (FastGS's 0.8) after each refine.
    And every final_prune_every steps in (final_prune_start, final_prune_stop), after refine_stop:
    the Gaussians with opacity < final_prune_opacity or prune score > final_prune_score go.
    Sampling is seeded by the step, so a resumed run makes the same choices.
    split_absgrad_threshold (FastGS's 0.0012; None: off): splits, as FastGS's, are chosen by the
    AbsGS statistic (out.means2d_absgrad, the run rendering with the rasterizer's absgrad switch)
    against this threshold, clones by the plain gradient against grad_threshold. The scores add
    2 x views renders a refine.
    """

    views: int = 10
    error_threshold: float = 0.1
    min_importance: float = 5.0
    prune_share: float = 0.5
    opacity_cap: float = 0.8
    final_prune_every: int = 3000
    final_prune_start: int = 15_000
    final_prune_stop: int = 30_000
    final_prune_opacity: float = 0.1
    final_prune_score: float = 0.9
    split_absgrad_threshold: float | None = None
    view_scorer: Scorer | None = field(default=None, repr=False, compare=False)  # set by the trainer

    SCHEDULE_FIELDS: ClassVar[tuple[str, ...]] = DefaultStrategy.SCHEDULE_FIELDS + (
        "final_prune_every", "final_prune_start", "final_prune_stop")
    INTERVAL_FIELDS: ClassVar[tuple[str, ...]] = DefaultStrategy.INTERVAL_FIELDS + ("final_prune_every",)

    def __post_init__(self):
        super().__post_init__()
        if self.views < 1:
            raise ValueError(f"FastGSStrategy: views must be >= 1, got {self.views}")
        if not 0.0 < self.prune_share <= 1.0:
            raise ValueError(f"FastGSStrategy: prune_share must be in (0, 1], got {self.prune_share}")
        if not 0.0 <= self.error_threshold < 1.0:
            raise ValueError(f"FastGSStrategy: error_threshold must be in [0, 1), got {self.error_threshold}")

    @property
    def wants_absgrad(self) -> bool:
        return self.absgrad or self.split_absgrad_threshold is not None

    def initial_state(self) -> dict:
        return {**super().initial_state(), "importance": torch.zeros(0), "prune_score": torch.zeros(0),
                "n_final_pruned": 0}

    def step_post_backward(self, params, optimizers, state, step, out, width, height, lr=None):
        super().step_post_backward(params, optimizers, state, step, out, width, height, lr)
        if self.final_prune_start < step < self.final_prune_stop and step % self.final_prune_every == 0:
            self.final_prune(params, optimizers, state, step)

    @torch.no_grad()
    def score(self, params: dict, state: dict, step: int) -> None:
        """state['importance'] and state['prune_score'] for the current Gaussians."""
        if self.view_scorer is None:
            raise RuntimeError("FastGSStrategy: no view_scorer; the trainer sets it (gsexp/train/setup.py), "
                               "a caller of its own must set strategy.view_scorer = f(k, seed)")
        counts, weighted = self.view_scorer(self.views, step)
        n = params["means"].shape[0]
        if counts.shape != (n,) or weighted.shape != (n,):
            raise ValueError(f"FastGSStrategy: view_scorer returned shapes {tuple(counts.shape)}, "
                             f"{tuple(weighted.shape)} for {n} Gaussians")
        state["importance"] = torch.div(counts.float(), self.views, rounding_mode="floor")
        low, high = weighted.min(), weighted.max()
        state["prune_score"] = ((weighted - low) / (high - low).clamp_min(1e-12)).float()

    @torch.no_grad()
    def refine(self, params: dict, optimizers: dict, state: dict, step: int) -> None:
        self.score(params, state, step)  # rows follow the surgery below (clones copy, splits get 0)
        super().refine(params, optimizers, state, step)
        if self.opacity_cap < 1.0:  # as 3DGS's reset (the moments forgotten), at FastGS's 0.8
            self.clamp_opacity(params, optimizers, self.opacity_cap)

    def candidates(self, state: dict, grads, small) -> torch.Tensor:
        high = super().candidates(state, grads, small)
        if self.split_absgrad_threshold is not None:
            high = split_by_absgrad(high, mean_absgrad(state), self.split_absgrad_threshold, small)
        return high & (state["importance"] > self.min_importance)

    def to_prune(self, params: dict, state: dict, step: int) -> torch.Tensor:
        candidates = super().to_prune(params, state, step)
        if self.prune_share >= 1.0:
            return candidates
        budget = int(self.prune_share * int(candidates.sum()))
        if budget == 0:
            return torch.zeros_like(candidates)
        weight = 1.0 / (1e-6 + 1.0 - state["prune_score"])
        # weighted sampling without replacement (Efraimidis-Spirakis): the budget largest u^(1/w)
        gen = torch.Generator(device=weight.device).manual_seed(step)
        keys = torch.log(torch.rand(weight.shape, generator=gen, device=weight.device)) / weight
        picked = torch.zeros_like(candidates)
        picked[torch.topk(keys, budget).indices] = True
        return candidates & picked

    @torch.no_grad()
    def final_prune(self, params: dict, optimizers: dict, state: dict, step: int) -> None:
        self.score(params, state, step)
        faint = torch.sigmoid(params["opacity_logits"]) < self.final_prune_opacity
        prune = faint | (state["prune_score"] > self.final_prune_score)
        self._stats(params, state)
        surgery.remove(params, optimizers, prune, state)
        state["n_final_pruned"] = int(prune.sum())
