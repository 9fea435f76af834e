"""Optimizers of the trainable parameters (gsexp.gaussians.params makes those): one Adam per
group, so a strategy that adds or removes Gaussians can edit both dicts in place."""
from __future__ import annotations

import math

import torch

from gsexp.train.optim import Adam

# name -> learning rate; "means" is scaled by the scene extent
LEARNING_RATES = {
    "means": 1.6e-4,
    "sh0": 2.5e-3,
    "shN": 2.5e-3 / 20,
    "opacity_logits": 0.025,
    "log_scales": 5e-3,
    "quats": 1e-3,
}


def make_optimizers(params: dict, extent: float, lr_scale: dict | None = None, torch_adam: bool = False) -> dict:
    """One Adam per group (so rows can be added or dropped per group), eps 1e-15 as in 3DGS:
    gsexp.train.optim.Adam, or torch.optim.Adam with torch_adam (fused_adam=false)."""
    lr_scale = lr_scale or {}
    kind = torch.optim.Adam if torch_adam else Adam
    opts = {}
    for name, p in params.items():
        lr = LEARNING_RATES[name] * (extent if name == "means" else 1.0) * lr_scale.get(name, 1.0)
        opts[name] = kind([{"params": [p], "lr": lr, "name": name}], eps=1e-15)
    return opts


def means_lr(step: int, total: int, extent: float, hold: int = 0) -> float:
    """3DGS position schedule: log-linear from 1.6e-4 to 1.6e-6 (x extent) over the run, or
    held at 1.6e-4 until step `hold` and log-linear over the steps after it."""
    t = min(max((step - hold) / max(total - hold, 1), 0.0), 1.0)
    return extent * 1.6e-4 ** (1 - t) * 1.6e-6 ** t


def scale_for_batch(optimizer, k: int) -> None:
    """k views a step (batch_size): lr x sqrt(k) and eps / sqrt(k) as gsplat's trainer; betas to
    the k-th power, the decay of k one-view steps (gsplat's 1 - k (1 - beta) agrees to first
    order and turns negative past k = 10)."""
    if k == 1:
        return
    for group in optimizer.param_groups:
        group["lr"] *= math.sqrt(k)
        group["eps"] /= math.sqrt(k)
        group["betas"] = tuple(b ** k for b in group["betas"])
