"""3D Gaussian Splatting as Markov Chain Monte Carlo (Kheradmand et al. 2024)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gsexp.gaussians import surgery
from gsexp.gaussians.geometry import covariance_3d
from gsexp.train.strategy.base import Strategy


@dataclass
class MCMCStrategy(Strategy):
    """Gaussians as samples of a distribution: relocate dead ones, grow slowly, add noise.

    At refine_start < step < refine_stop, step % refine_every == 0: every Gaussian with
    opacity <= min_opacity is moved onto a live one drawn in proportion to opacity (the pair
    shares the source's opacity and footprint, see surgery.relocation_adjustment); then
    grow_rate * N new Gaussians are added the same way, never beyond cap_max.
    Every step (SGLD): means += noise_lr * lr * sigmoid(-k (opacity - t)) * Sigma @ eps,
    eps ~ N(0, I), Sigma the Gaussian's 3D covariance, so nearly transparent Gaussians
    explore while opaque ones stay put. `lr` is the current means learning rate (defaults
    to optimizers["means"]' lr). The paper also adds `regularization(params)` to the loss.
    """

    cap_max: int = 1_000_000
    noise_lr: float = 5e5
    grow_rate: float = 0.05
    min_opacity: float = 0.005
    noise_k: float = 100.0
    noise_t: float = 0.005
    opacity_reg: float = 0.01
    scale_reg: float = 0.01
    n_max: int = 51  # copies per source that the relocation formula accounts for
    refine_start: int = 500
    refine_stop: int = 25_000
    refine_every: int = 100

    SCHEDULE_FIELDS: ClassVar[tuple[str, ...]] = ("refine_start", "refine_stop", "refine_every")
    INTERVAL_FIELDS: ClassVar[tuple[str, ...]] = ("refine_every",)
    FLOOR_FIELDS: ClassVar[tuple[str, ...]] = ("refine_every",)

    def initial_state(self) -> dict:
        return {"n_relocated": 0, "n_added": 0}

    def step_post_backward(self, params, optimizers, state, step, out, width, height, lr=None):
        if self.refine_start < step < self.refine_stop and step % self.refine_every == 0:
            self.refine(params, optimizers, state)
        if lr is None:
            lr = optimizers["means"].param_groups[0]["lr"]
        self.inject_noise(params, lr)

    @torch.no_grad()
    def refine(self, params: dict, optimizers: dict, state: dict) -> None:
        """Relocate dead Gaussians, then grow towards cap_max."""
        dead = torch.sigmoid(params["opacity_logits"]) <= self.min_opacity
        state["n_relocated"] = surgery.relocate(params, optimizers, dead, self.min_opacity, self.n_max)
        n = params["means"].shape[0]
        n_new = max(0, min(self.cap_max, int(n * (1 + self.grow_rate))) - n)
        state["n_added"] = surgery.add(params, optimizers, n_new, self.min_opacity, self.n_max)

    @torch.no_grad()
    def inject_noise(self, params: dict, lr: float, generator: torch.Generator | None = None) -> None:
        means = params["means"]
        opacity = torch.sigmoid(params["opacity_logits"])
        gate = torch.sigmoid(-self.noise_k * (opacity - self.noise_t))
        cov = covariance_3d(params["log_scales"], params["quats"])
        eps = torch.randn(means.shape, generator=generator, device=means.device, dtype=means.dtype)
        means.add_((cov @ eps.unsqueeze(-1)).squeeze(-1) * (self.noise_lr * lr * gate).unsqueeze(-1))

    def regularization(self, params: dict) -> torch.Tensor:
        """The paper's L1 penalties on opacity and scale: unused Gaussians fade and die."""
        return (self.opacity_reg * torch.sigmoid(params["opacity_logits"]).mean()
                + self.scale_reg * params["log_scales"].exp().mean())
