"""Gaussians <-> trainable parameters, kept as a plain dict name -> Parameter (gsplat's
convention): surgery (gaussians/surgery.py) swaps entries, a checkpoint stores them."""
from __future__ import annotations

import torch

from gsexp.gaussians.model import Gaussians
from gsexp.gaussians.sh import num_sh_bases


def make_params(g: Gaussians) -> dict[str, torch.nn.Parameter]:
    """One Parameter per group; SH is split into its DC term and the rest (own learning rates)."""
    tensors = {"means": g.means, "sh0": g.sh[:, :1], "shN": g.sh[:, 1:],
               "opacity_logits": g.opacity_logits, "log_scales": g.log_scales, "quats": g.quats}
    return {k: torch.nn.Parameter(v.detach().clone().contiguous()) for k, v in tensors.items()}


def to_gaussians(params: dict, sh_degree: int) -> Gaussians:
    """A Gaussians view of the parameters (differentiable: gradients reach the Parameters)."""
    return _ParamGaussians(params, sh_degree)


class _ParamGaussians(Gaussians):
    """Gaussians over training's parameters. `sh` is the concatenation of sh0 and shN, made when
    first read; the CUDA rasterizer reads `sh_parts` instead, sparing a copy of every SH
    coefficient each way per training step. Shapes are the parameters' own (make_params)."""

    def __init__(self, params: dict, sh_degree: int):  # no __post_init__: it would read sh
        self.means, self.log_scales, self.quats = params["means"], params["log_scales"], params["quats"]
        self.opacity_logits, self.sh_degree = params["opacity_logits"], sh_degree
        self.sh_parts = (params["sh0"], params["shN"])
        if not 0 <= sh_degree <= 3 or self.sh_parts[0].shape[1] + self.sh_parts[1].shape[1] != num_sh_bases(sh_degree):
            raise ValueError(f"to_gaussians: sh0 {tuple(self.sh_parts[0].shape)} and shN {tuple(self.sh_parts[1].shape)} "
                             f"do not hold the {num_sh_bases(sh_degree)} SH bases of degree {sh_degree}")

    def __getattr__(self, name: str):  # only for attributes not set: sh, the first time
        if name != "sh":
            raise AttributeError(name)
        self.sh = torch.cat(self.__dict__["sh_parts"], 1)
        return self.sh
