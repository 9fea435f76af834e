"""Trainable parameters and their optimizers, kept as plain dicts (gsplat's convention):
a strategy that adds or removes Gaussians edits both dicts in place, and a checkpoint is
their state dicts."""
from __future__ import annotations

import torch

from gsexp.gaussians import Gaussians

# name -> (Gaussians field, learning rate; "means" is scaled by the scene extent)
LEARNING_RATES = {
    "means": 1.6e-4,
    "sh0": 2.5e-3,
    "shN": 2.5e-3 / 20,
    "opacity_logits": 0.025,
    "log_scales": 5e-3,
    "quats": 1e-3,
}


def make_params(g: Gaussians) -> dict[str, torch.nn.Parameter]:
    """One Parameter per group; SH is split into its DC term and the rest (own learning rates)."""
    tensors = {"means": g.means, "sh0": g.sh[:, :1], "shN": g.sh[:, 1:],
               "opacity_logits": g.opacity_logits, "log_scales": g.log_scales, "quats": g.quats}
    return {k: torch.nn.Parameter(v.detach().clone().contiguous()) for k, v in tensors.items()}


def make_optimizers(params: dict, extent: float, lr_scale: dict | None = None) -> dict[str, torch.optim.Adam]:
    """One Adam per group (so rows can be added or dropped per group), eps 1e-15 as in 3DGS."""
    lr_scale = lr_scale or {}
    opts = {}
    for name, p in params.items():
        lr = LEARNING_RATES[name] * (extent if name == "means" else 1.0) * lr_scale.get(name, 1.0)
        opts[name] = torch.optim.Adam([{"params": [p], "lr": lr, "name": name}], eps=1e-15)
    return opts


def to_gaussians(params: dict, sh_degree: int) -> Gaussians:
    """A Gaussians view of the parameters (differentiable: gradients reach the Parameters)."""
    return Gaussians(params["means"], params["log_scales"], params["quats"], params["opacity_logits"],
                     torch.cat([params["sh0"], params["shN"]], 1), sh_degree)


def means_lr(step: int, total: int, extent: float) -> float:
    """3DGS position schedule: log-linear from 1.6e-4 to 1.6e-6 (x extent) over the run."""
    t = min(max(step / max(total, 1), 0.0), 1.0)
    return extent * 1.6e-4 ** (1 - t) * 1.6e-6 ** t
