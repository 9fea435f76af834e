"""Compact-3DGS's learnable mask."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from gsexp.compress.base import NoCompression, _steps
from gsexp.gaussians import surgery
from gsexp.gaussians.params import to_gaussians


@dataclass
class Mask(NoCompression):
    """Compact-3DGS's learnable mask: m = sigmoid(logit) per Gaussian, a hard mask m > threshold
    used straight-through on scale and opacity, lambda * mean(m) in the loss, and masked
    Gaussians removed every `remove_every` steps and at the end."""

    lam: float = 0.0005
    threshold: float = 0.01
    lr: float = 0.01
    remove_every: int = 1000  # for a 30K-step run (scaled)

    def scaled(self, total_iterations: int) -> "Mask":
        return dataclasses.replace(self, remove_every=_steps(self.remove_every, total_iterations))

    def setup(self, params, optimizers) -> None:
        if "mask_logits" not in params:  # a resumed run brings its own
            means = params["means"]
            params["mask_logits"] = torch.nn.Parameter(torch.ones(len(means), device=means.device))
        adam = type(optimizers["means"])  # the run's kind: gsexp's Adam, or torch's with fused_adam=false
        optimizers["mask_logits"] = adam(
            [{"params": [params["mask_logits"]], "lr": self.lr, "name": "mask_logits"}], eps=1e-15)

    def gaussians(self, params, sh_degree: int):
        g = to_gaussians(params, sh_degree)
        if "mask_logits" not in params:
            return g
        soft = torch.sigmoid(params["mask_logits"])
        hard = soft + ((soft > self.threshold).to(soft) - soft).detach()  # straight-through
        # scale * m: log_scale + log m (m = 0 gives -inf: a point of zero size, never drawn);
        # opacity * m: its logit as logit(sigmoid(o) * m).
        opacity = torch.sigmoid(params["opacity_logits"]) * hard
        g.log_scales = g.log_scales + torch.log(hard.clamp_min(1e-12))[:, None]
        g.opacity_logits = torch.logit(opacity.clamp(1e-12, 1 - 1e-7))
        return g

    def regularization(self, params):
        return self.lam * torch.sigmoid(params["mask_logits"]).mean() if "mask_logits" in params else 0.0

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        if (step + 1) % self.remove_every == 0:
            self._remove(params, optimizers, state)

    def finalize(self, params, cameras, sh_degree: int, state: dict | None = None):
        self._remove(params, {}, None)
        params.pop("mask_logits", None)
        return None

    def _remove(self, params, optimizers, state) -> None:
        with torch.no_grad():
            drop = torch.sigmoid(params["mask_logits"]) <= self.threshold
        if drop.all():
            raise ValueError(f"compress mask: every Gaussian is masked out; lower compress.options.lam "
                             f"(now {self.lam}) or compress.options.lr (now {self.lr})")
        if drop.any():
            surgery.remove(params, optimizers, drop, state)
