"""Weighted k-means vector quantisation (LightGaussian's SH codebook)."""
from __future__ import annotations

import torch


@torch.no_grad()
def kmeans(x: torch.Tensor, k: int, weights: torch.Tensor | None = None, iterations: int = 10,
           seed: int = 0, chunk: int = 65536) -> tuple[torch.Tensor, torch.Tensor]:
    """Codebook [k, D] and indices [N] minimising sum_i w_i |x_i - c(i)|^2 (Lloyd's iterations;
    initial codes drawn with probability proportional to weight). k is capped at N."""
    if x.dim() != 2 or len(x) == 0:
        raise ValueError(f"kmeans: need a non-empty [N, D] tensor, got shape {tuple(x.shape)}")
    n = len(x)
    k = min(k, n)
    w = torch.ones(n, device=x.device, dtype=x.dtype) if weights is None else weights.to(x).clamp_min(0)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    p = (w + 1e-12).cpu()
    codes = x[torch.multinomial(p / p.sum(), k, replacement=False, generator=gen).to(x.device)].clone()
    for _ in range(iterations):
        idx = assign(x, codes, chunk)
        total = torch.zeros_like(codes).index_add_(0, idx, x * w[:, None])
        mass = torch.zeros(k, device=x.device, dtype=x.dtype).index_add_(0, idx, w)
        used = mass > 0
        codes[used] = total[used] / mass[used, None]  # empty codes keep their place
    return codes, assign(x, codes, chunk)


def assign(x: torch.Tensor, codes: torch.Tensor, chunk: int = 65536) -> torch.Tensor:
    """Index of the nearest code for every row of x, in chunks (N x k distances can be large)."""
    out = torch.empty(len(x), dtype=torch.long, device=x.device)
    c2 = (codes * codes).sum(1)
    for start in range(0, len(x), chunk):
        part = x[start:start + chunk]
        d = c2[None, :] - 2 * part @ codes.T  # |x|^2 is the same for every code
        out[start:start + chunk] = d.argmin(1)
    return out
