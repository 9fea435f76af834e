"""Gaussians <-> trainable parameters, kept as a plain dict name -> Parameter (gsplat's
convention): surgery (gaussians/surgery.py) swaps entries, a checkpoint stores them."""
from __future__ import annotations

import torch

from gsexp.gaussians.model import Gaussians


def make_params(g: Gaussians) -> dict[str, torch.nn.Parameter]:
    """One Parameter per group; SH is split into its DC term and the rest (own learning rates)."""
    tensors = {"means": g.means, "sh0": g.sh[:, :1], "shN": g.sh[:, 1:],
               "opacity_logits": g.opacity_logits, "log_scales": g.log_scales, "quats": g.quats}
    return {k: torch.nn.Parameter(v.detach().clone().contiguous()) for k, v in tensors.items()}


def to_gaussians(params: dict, sh_degree: int) -> Gaussians:
    """A Gaussians view of the parameters (differentiable: gradients reach the Parameters)."""
    return Gaussians(params["means"], params["log_scales"], params["quats"], params["opacity_logits"],
                     torch.cat([params["sh0"], params["shN"]], 1), sh_degree)
