"""The strategy interface: when and how Gaussians are added, removed or moved during training.

A strategy is a small dataclass of settings; everything that changes during training lives
in a `state` dict that the caller owns (created by `initial_state()`, saved in checkpoints:
plain tensors and numbers only, so `torch.load(..., weights_only=True)` reads it back).

Per training step the caller does::

    out = render(to_gaussians(params, d), camera)
    strategy.step_pre_backward(params, optimizers, state, step, out)
    loss.backward()
    for opt in optimizers.values(): opt.step(); opt.zero_grad(set_to_none=True)
    strategy.step_post_backward(params, optimizers, state, step, out, W, H, lr=current_means_lr)

With several views a step (batch_size), `observe` takes each view's `out` but the last's first.

`step_post_backward` may replace entries of `params` (and the tensors inside `optimizers`)
with new Parameters of another length, so callers must re-read `params` every step.
It reads only `out.means2d.grad` / `out.radii`, and surgery carries `.grad` rows along
with Adam's, so it may run before or after the optimizer step.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from gsexp.schedule import REFERENCE_ITERATIONS


@dataclass
class Strategy:
    """Base class and the do-nothing behaviour; subclasses override what they need.

    scene_extent: the scene's radius (world units), set by the caller for every strategy;
    thresholds given relative to the scene size use it. white_background: whether the scene
    is composited on white (set by the caller; 3DGS treats such scenes slightly differently).
    training_pixels: the pixels of all training views (set by the caller; 0 = unknown), the
    default bound on the number of Gaussians.
    """

    scene_extent: float = 1.0
    white_background: bool = False
    training_pixels: int = 0

    # Step-count fields that `scaled` rescales, which of them are intervals (kept >= 1), and which
    # intervals never shrink below their reference value (see `scaled`).
    SCHEDULE_FIELDS: ClassVar[tuple[str, ...]] = ()
    INTERVAL_FIELDS: ClassVar[tuple[str, ...]] = ()
    FLOOR_FIELDS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        # 0 would not mean "off": scaled() lifts an interval to 1, so refine_every=0 refined every step
        for name in self.SCHEDULE_FIELDS:
            low, value = (1 if name in self.INTERVAL_FIELDS else 0), getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                hint = (" (resets happen only while densifying: to never reset, set it at or above refine_stop)"
                        if name == "reset_every" else "")
                raise ValueError(f"{type(self).__name__}: {name} must be a number of steps >= {low} "
                                 f"(for a 30K-step run; scaled to iterations), got {value!r}{hint}")

    def initial_state(self) -> dict:
        return {}

    def check(self, params: dict, optimizers: dict) -> None:
        """Raise if the dicts break the conventions the surgery relies on (see gaussians.surgery)."""
        for name, p in params.items():
            opt = optimizers.get(name)
            if opt is None:
                continue
            if len(opt.param_groups) != 1 or len(opt.param_groups[0]["params"]) != 1:
                raise ValueError(f"{type(self).__name__}: optimizer {name!r} must hold exactly one "
                                 f"param group with one tensor")
            if opt.param_groups[0]["params"][0] is not p:
                raise ValueError(f"{type(self).__name__}: optimizer {name!r} does not hold params[{name!r}]")
        lengths = {name: p.shape[0] for name, p in params.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{type(self).__name__}: parameter groups differ in length: {lengths}")

    def step_pre_backward(self, params: dict, optimizers: dict, state: dict, step: int, out) -> None:
        """Before `loss.backward()` (every backend's out.means2d already keeps its .grad)."""

    def step_post_backward(self, params: dict, optimizers: dict, state: dict, step: int, out,
                           width: int, height: int, lr: float | None = None) -> None:
        """After `loss.backward()`: update statistics and, on schedule, edit `params`/`optimizers`."""

    def observe(self, params: dict, state: dict, step: int, out, width: int, height: int) -> None:
        """After `loss.backward()`, for each view of a batch but the last (whose
        step_post_backward follows): its statistics, no edits."""

    def regularization(self, params: dict) -> torch.Tensor | float:
        """Extra loss term the strategy relies on (MCMC's opacity/scale penalties); 0 here."""
        return 0.0

    def scaled(self, total_iterations: int, reference: int = REFERENCE_ITERATIONS,
               batch_size: int = 1) -> "Strategy":
        """A copy with every schedule field multiplied by total_iterations / reference.

        Field values are read as settings for a `reference`-iteration run (3DGS's 30k), so
        `DefaultStrategy().scaled(3000)` refines from 50 to 1500 and resets opacity every 300.
        Thresholds are not touched; intervals stay >= 1, and FLOOR_FIELDS (the refine interval)
        never go below their reference value: it still refines every 100 steps. A shorter interval
        leaves the optimiser too few steps between refines to lower the gradients, so each refine
        grows again: at 1,200 steps the scaled interval of 4 took the synthetic scene from 1,000 to
        9,476 Gaussians by step 50 (issue 37; its beer at 160x90, 465 -> 188,470 by step 315,
        was not re-run). With batch_size k the floor is the reference value / k: as many views
        between refines as one-view steps (gsplat's steps_scaler scales the interval too); with
        the floor in steps, batch_size=2 in half the steps refined half as often and the synthetic
        scene ended with 3,232 Gaussians at 37.26 dB against 7,324 at 39.01.
        """
        if total_iterations <= 0:
            raise ValueError(f"{type(self).__name__}.scaled: total_iterations must be positive, "
                             f"got {total_iterations}")
        factor = total_iterations / reference
        changes = {}
        for name in self.SCHEDULE_FIELDS:
            value = max(0, round(getattr(self, name) * factor))
            if name in self.FLOOR_FIELDS:
                value = max(value, math.ceil(getattr(self, name) / batch_size))
            changes[name] = max(1, value) if name in self.INTERVAL_FIELDS else value
        return dataclasses.replace(self, **changes)


@dataclass
class NoStrategy(Strategy):
    """A fixed set of Gaussians: nothing is ever added, removed or moved."""
