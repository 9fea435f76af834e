"""LightGaussian's vector quantisation: the SH rest of the least significant Gaussians goes
to a significance-weighted k-means codebook, everything but positions to fp16; at the end,
or at `vq_step`, after which the quantised rows stay fixed and the rest fine-tunes."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from gsexp.compress import format as fmt
from gsexp.compress.base import NoCompression, _steps
from gsexp.compress.kmeans import kmeans
from gsexp.compress.significance import significance
from gsexp.gaussians.params import to_gaussians
from gsexp.gaussians.sh import sh_degree_of

# state key: per Gaussian, 1 + its codebook row once quantised at vq_step, 0 otherwise. Kept in
# the strategy state so that surgery moves it with the rows (clones copy it; split children
# start at 0 and simply train their copied SH rest) and checkpoints carry it.
VQ_CODE = "vq_code"


@dataclass
class VectorQuantize(NoCompression):
    codes: int = 8192        # codebook size
    fraction: float = 0.6    # least significant share whose SH rest is quantised
    beta: float = 0.1
    iterations: int = 10     # k-means (Lloyd) iterations
    position_bits: int = 32  # 16: positions on a 16-bit grid over their bounding box (format.py)
    vq_step: int | None = None  # quantise here (30K-step units) and fine-tune after; None: at the end

    def __post_init__(self):
        if not 0 <= self.fraction <= 1 or self.codes < 1:
            raise ValueError(f"compress vq: need 0 <= fraction <= 1 and codes >= 1, got {self.fraction}, {self.codes}")
        if self.position_bits not in (16, 32):
            raise ValueError(f"compress vq: position_bits must be 16 or 32, got {self.position_bits}")
        if self.vq_step is not None and (not isinstance(self.vq_step, int) or self.vq_step < 1):
            raise ValueError(f"compress vq: vq_step must be a step >= 1 or null, got {self.vq_step!r}")

    def scaled(self, total_iterations: int):
        if self.vq_step is None:
            return self
        return dataclasses.replace(self, vq_step=_steps(self.vq_step, total_iterations))

    def quantize(self, g, cameras):
        """(mask [N], codebook [C, D], index [M]) for the least significant `fraction`, or None."""
        n, k = len(g), g.sh.shape[1]
        if k == 1 or n == 0 or self.fraction == 0:
            return None
        score = significance(g, cameras, self.beta).float().cpu()
        mask = torch.zeros(n, dtype=torch.bool)
        mask[torch.argsort(score)[: int(self.fraction * n)]] = True
        if not mask.any():
            return None
        rest = g.sh.detach().cpu()[mask, 1:].reshape(int(mask.sum()), -1)
        codebook, index = kmeans(rest, self.codes, weights=score[mask] + 1e-6, iterations=self.iterations)
        return mask, codebook, index

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        if self.vq_step is None or step + 1 != self.vq_step:
            return
        with torch.no_grad():
            g = to_gaussians({k: v.detach() for k, v in params.items()}, sh_degree_of(1 + params["shN"].shape[1]))
            found = self.quantize(g, cameras)
            code = torch.zeros(len(g), dtype=torch.long)
            if found is not None:
                mask, codebook, index = found
                rows = params["shN"]
                rows[mask.to(rows.device)] = codebook[index].reshape(-1, *rows.shape[1:]).to(rows)
                code[mask] = index + 1
                # zero Adam moments: with zero gradients from here on, Adam leaves these rows exactly
                for moment in optimizers["shN"].state.get(rows, {}).values():
                    if torch.is_tensor(moment) and moment.shape == rows.shape:
                        moment[mask.to(moment.device)] = 0
            state[VQ_CODE] = code.to(params["shN"].device)

    def post_backward(self, params, state) -> None:
        code = state.get(VQ_CODE)
        grad = params["shN"].grad
        if code is not None and grad is not None:
            grad[code > 0] = 0

    def finalize(self, params, cameras, sh_degree: int, state: dict | None = None):
        g = to_gaussians({k: v.detach() for k, v in params.items()}, sh_degree)
        code = (state or {}).get(VQ_CODE)
        if code is not None and (code > 0).any():  # quantised at vq_step: the fixed rows are the codes
            code = code.cpu()
            mask = code > 0
            used, index = torch.unique(code[mask] - 1, return_inverse=True)
            codebook = torch.zeros(len(used), (g.sh.shape[1] - 1) * 3)
            codebook[index] = g.sh.detach().cpu()[mask, 1:].reshape(int(mask.sum()), -1)
            return fmt.encode(g, mask, codebook, index, position_bits=self.position_bits)
        found = self.quantize(g, cameras)
        if found is None:
            return fmt.encode(g, position_bits=self.position_bits)
        return fmt.encode(g, *found, position_bits=self.position_bits)
