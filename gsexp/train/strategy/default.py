"""Adaptive density control of the original 3DGS (Kerbl et al. 2023)."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import torch

from gsexp.gaussians import surgery
from gsexp.train.strategy.base import Strategy

log = logging.getLogger("gsexp.train")


@dataclass
class DefaultStrategy(Strategy):
    """Clone / split where the view-space gradient is large, prune what is faint or huge.

    Every step with step < refine_stop: for each Gaussian visible in the view, accumulate
    ||dL/d mean2d|| in NDC units and count the view; track its largest pixel radius.
    At refine_start < step < refine_stop, step % refine_every == 0: Gaussians whose mean
    gradient is >= grad_threshold are cloned if their largest scale is <= percent_dense *
    scene_extent, else split in two; then those with opacity < prune_opacity are removed,
    and once past the first opacity reset also those wider than prune_world * scene_extent
    in world units (and than prune_screen_px pixels, when > 0); the statistics restart.
    prune_screen_px is off by default: in 3DGS's code it never fires (max_radii2D is zeroed
    before the check, graphdeco-inria/gaussian-splatting#643) and the published results
    depend on that; enabled, it pruned lego at 800x800 from 96K to 22K Gaussians at the
    first reset and capped it near 29K (29.0 dB test PSNR, experiments/vanilla_cuda).
    Every reset_every steps (while step < refine_stop) opacities are clamped to reset_opacity,
    and on white-background scenes once more at refine_start, as 3DGS does.
    Steps are the caller's iteration counter; defaults are 3DGS's for 30k iterations
    (`scaled(total)` rescales them). `scene_extent` must be set by the caller.
    max_gaussians (None: one per training pixel, none when training_pixels is unknown) bounds the
    count that clone and split may reach: past it only the highest-gradient candidates that fit
    are refined, and a warning says so once. More Gaussians than pixels only fit noise.
    absgrad (AbsGS, Ye et al. 2024): a second statistic sums |dL/d mean2d| over each Gaussian's
    pixels before the norm (out.means2d_absgrad; the run renders with the rasterizer's absgrad
    switch), so gradients of opposite sign no longer cancel. absgrad_rule says how it chooses:
    - split (AbsGS's code): splits (large Gaussians) by it against absgrad_threshold (None: 4 x
      grad_threshold, AbsGS's 0.0008 for 3DGS's 0.0002), clones by 3DGS's gradient;
    - both: clones and splits by it against absgrad_threshold (gsexp's absgrad before
      2026-12-06, the first `abs` rows of experiments/rasterizer_modes);
    - quantile (Mip-Splatting's and Gaussian Opacity Fields' code): clones and splits by 3DGS's
      gradient, and also the Gaussians whose absolute statistic is among the top share of them,
      the share that 3DGS's gradient selects (absgrad_threshold unused).
    """

    grad_threshold: float = 0.0002
    percent_dense: float = 0.01
    split_n: int = 2
    prune_opacity: float = 0.005
    prune_screen_px: float = 0.0  # 3DGS's 20 as written, but see above: 0 = off
    prune_world: float = 0.1
    reset_opacity: float = 0.01
    refine_start: int = 500
    refine_stop: int = 15_000
    refine_every: int = 100
    reset_every: int = 3000
    max_gaussians: int | None = None
    absgrad: bool = False
    absgrad_threshold: float | None = None
    absgrad_rule: str = "split"
    # Set by the trainer with model.filter_3d: params -> [N] the factor rendering applies to each
    # opacity, so that resets (and caps) bound the opacity as rendered, as Mip-Splatting's do.
    opacity_factor: Callable[[dict], torch.Tensor] | None = field(default=None, repr=False, compare=False)

    SCHEDULE_FIELDS: ClassVar[tuple[str, ...]] = ("refine_start", "refine_stop", "refine_every", "reset_every")
    INTERVAL_FIELDS: ClassVar[tuple[str, ...]] = ("refine_every", "reset_every")
    FLOOR_FIELDS: ClassVar[tuple[str, ...]] = ("refine_every",)
    # Per-Gaussian statistics: sized on the first step, carried through surgery, zeroed at each refine
    # (grad2d_abs: accumulated only when wants_absgrad).
    STATS: ClassVar[tuple[str, ...]] = ("grad2d", "count", "max_radii", "grad2d_abs")

    ABSGRAD_RULES: ClassVar[tuple[str, ...]] = ("split", "both", "quantile")

    def __post_init__(self):
        super().__post_init__()
        if self.absgrad_rule not in self.ABSGRAD_RULES:
            raise ValueError(f"{type(self).__name__}: absgrad_rule must be one of {', '.join(self.ABSGRAD_RULES)}, "
                             f"got {self.absgrad_rule!r}")

    @property
    def wants_absgrad(self) -> bool:
        """Whether the run renders with the rasterizer's absgrad switch (out.means2d_absgrad)."""
        return self.absgrad

    @property
    def abs_threshold(self) -> float:
        """absgrad's threshold on the absolute statistic."""
        return 4 * self.grad_threshold if self.absgrad_threshold is None else self.absgrad_threshold

    def initial_state(self) -> dict:
        # Sized lazily on the first step (N and device come from the params).
        return {**{key: torch.zeros(0) for key in self.STATS}, "n_cloned": 0, "n_split": 0, "n_pruned": 0, "capped": 0}

    def step_post_backward(self, params, optimizers, state, step, out, width, height, lr=None):
        if step >= self.refine_stop:
            return
        self._accumulate(params, state, out, width, height)
        if step > self.refine_start and step % self.refine_every == 0:
            self.refine(params, optimizers, state, step)
        # 3DGS also resets once at refine_start on white backgrounds (its train.py), clearing the
        # random init's fog before densification has spent much on it.
        first = self.white_background and step == self.refine_start
        if step > 0 and (step % self.reset_every == 0 or first):
            self.clamp_opacity(params, optimizers, self.reset_opacity)

    def clamp_opacity(self, params: dict, optimizers: dict, value: float) -> None:
        """Every opacity as rendered at most `value`, the opacity's Adam moments forgotten."""
        factor = self.opacity_factor(params) if self.opacity_factor is not None else None
        surgery.reset_opacity(params, optimizers, value, factor)

    def observe(self, params, state, step, out, width, height):
        if step < self.refine_stop:
            self._accumulate(params, state, out, width, height)

    def _stats(self, params: dict, state: dict) -> None:
        n, device = params["means"].shape[0], params["means"].device
        for key in self.STATS:
            v = state.get(key, torch.zeros(0))  # a checkpoint from before a statistic was added
            if v.numel() == 0 and n > 0:
                state[key] = torch.zeros(n, device=device)
            elif v.shape[0] != n:
                raise ValueError(f"DefaultStrategy: state[{key!r}] has {v.shape[0]} rows but there are "
                                 f"{n} Gaussians (params edited outside the strategy?)")
            else:
                state[key] = v.to(device)

    @torch.no_grad()
    def _accumulate(self, params, state, out, width: int, height: int) -> None:
        self._stats(params, state)
        grad = out.means2d.grad
        if grad is None:
            return
        absgrad = getattr(out, "means2d_absgrad", None)
        if self.wants_absgrad and absgrad is not None:  # AbsGS's statistic, as grad2d below
            state["grad2d_abs"] += torch.where(out.radii > 0, ndc_norm(absgrad, width, height), 0.0)
        # INRIA measures the gradient w.r.t. NDC positions: d/d ndc = d/d px * (size / 2).
        if _fused_stats(grad, out.radii, width / 2, height / 2, state):
            return
        # Masks as arithmetic, not boolean indexing: indexing asks the host for the count (a sync).
        visible = out.radii > 0
        state["grad2d"] += torch.where(visible, ndc_norm(grad, width, height), 0.0)
        state["count"] += visible
        torch.maximum(state["max_radii"], torch.where(visible, out.radii.float(), 0.0), out=state["max_radii"])

    @torch.no_grad()
    def refine(self, params: dict, optimizers: dict, state: dict, step: int) -> None:
        """Clone, split and prune from the accumulated statistics, then restart them."""
        self._stats(params, state)
        grads = state["grad2d"] / state["count"].clamp_min(1)
        small = params["log_scales"].max(dim=1).values <= math.log(self.percent_dense * self.scene_extent)
        high = self.to_refine(params, state, grads, small, step)
        clone, split = high & small, high & ~small
        # The counts come from the changes in N, which the host knows: no sync of their own.
        n0 = len(params["means"])
        surgery.duplicate(params, optimizers, clone, state)
        n1 = len(params["means"])
        split = torch.cat([split, split.new_zeros(n1 - n0)])  # clones are not split
        surgery.split(params, optimizers, split, n=self.split_n, state=state)
        n2 = len(params["means"])

        prune = self.to_prune(params, state, step)
        surgery.remove(params, optimizers, prune, state)

        n_split = (n2 - n1) // (self.split_n - 1) if self.split_n > 1 else int(split.sum())
        state.update(n_cloned=n1 - n0, n_split=n_split, n_pruned=n2 - len(params["means"]))
        for key in self.STATS:
            state[key].zero_()

    def to_prune(self, params: dict, state: dict, step: int) -> torch.Tensor:
        """Which Gaussians to remove after cloning and splitting: faint ones, and once past the
        first opacity reset those too wide in the world (or on screen)."""
        prune = torch.sigmoid(params["opacity_logits"]) < self.prune_opacity
        if step > self.reset_every:  # before the first reset, opacity alone decides
            if self.prune_screen_px > 0:
                prune |= state["max_radii"] > self.prune_screen_px
            prune |= params["log_scales"].max(dim=1).values > math.log(self.prune_world * self.scene_extent)
        return prune

    def to_refine(self, params: dict, state: dict, grads, small, step: int) -> torch.Tensor:
        """Which Gaussians to clone (small) or split: the candidates, within the cap."""
        high = self.candidates(state, grads, small)
        cap = self.max_gaussians if self.max_gaussians is not None else (self.training_pixels or None)
        return high if cap is None else self._within_cap(high, small, grads, cap, state)

    def candidates(self, state: dict, grads, small) -> torch.Tensor:
        """Clone / split candidates before the cap: the mean gradient at grad_threshold; with
        absgrad, as absgrad_rule says (the class's docstring)."""
        high = grads >= self.grad_threshold
        if not self.absgrad:
            return high
        abs_grads = mean_absgrad(state)
        if self.absgrad_rule == "quantile":  # as many again, by the absolute statistic (a sync: refines only)
            k = int(high.sum())
            if k == 0:
                return high
            return high | (abs_grads >= torch.topk(abs_grads, k).values[-1])
        clone = abs_grads >= self.abs_threshold if self.absgrad_rule == "both" else high
        return split_by_absgrad(clone, abs_grads, self.abs_threshold, small)

    def _within_cap(self, high, small, grads, cap: int, state: dict) -> torch.Tensor:
        """`high` less its lowest-gradient candidates, so that clones (one new Gaussian each)
        and splits (split_n - 1 each) keep the count within `cap`."""
        room = cap - len(grads)
        if int((torch.where(small, 1, self.split_n - 1) * high).sum()) <= room:
            return high
        if not state.get("capped"):
            log.warning(f"densification reached its cap of {cap:,} Gaussians (strategy.options.max_gaussians; "
                        "default: one per training pixel): only the highest-gradient ones are cloned or split "
                        "from now on; raise it if the scene needs more")
        state["capped"] = 1
        return self._best_within(high, grads, small, room)

    def _best_within(self, chosen, rank, small, room: int) -> torch.Tensor:
        """`chosen` less its lowest-`rank` members, so that what the rest add (a clone one
        Gaussian, a split split_n - 1) stays within `room`."""
        cost = torch.where(small, 1, self.split_n - 1) * chosen
        order = torch.argsort(torch.where(chosen, rank, -1.0), descending=True)
        fits = torch.zeros_like(chosen)
        fits[order] = torch.cumsum(cost[order], 0) <= max(room, 0)
        return chosen & fits


def mean_absgrad(state: dict) -> torch.Tensor:
    """Per Gaussian the mean over its views of AbsGS's statistic (state['grad2d_abs'])."""
    return state["grad2d_abs"] / state["count"].clamp_min(1)


def split_by_absgrad(clone: torch.Tensor, abs_grads: torch.Tensor, threshold: float, small: torch.Tensor):
    """AbsGS's refine: the small Gaussians of `clone`, and the large ones whose absolute statistic
    reaches `threshold`."""
    return (clone & small) | ((abs_grads >= threshold) & ~small)


def ndc_norm(grad: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """Per Gaussian ||dL/d mean2d|| in NDC units, as INRIA measures it: d/d ndc = d/d px * (size / 2)
    (the scales as Python numbers: a host-to-device tensor of them would sync)."""
    return torch.hypot(grad[:, 0] * (width / 2), grad[:, 1] * (height / 2))


def _fused_stats(grad: torch.Tensor, radii: torch.Tensor, half_w: float, half_h: float, state: dict) -> bool:
    """The statistics above in one CUDA launch (csrc/densify.cu) instead of about ten; False
    where it does not apply (CPU, or tensors of other types)."""
    tensors = (grad, radii, state["grad2d"], state["count"], state["max_radii"])
    if not all(t.is_cuda and t.is_contiguous() for t in tensors) or radii.dtype != torch.int32 \
            or any(t.dtype != torch.float32 for t in tensors if t is not radii):
        return False
    from gsexp.render.cuda.build import load

    load().densify_stats(grad, radii, half_w, half_h, state["grad2d"], state["count"], state["max_radii"])
    return True
