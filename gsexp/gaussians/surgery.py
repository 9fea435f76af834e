"""Parameter surgery: adding, removing and moving Gaussians during training (the strategies
and compression use it).

Every op edits `params` (name -> nn.Parameter, all of length N) and `optimizers`
(name -> Adam holding params[name]) in place: each group gets a new Parameter, swapped into
its optimizer, and Adam's per-row moments (exp_avg, exp_avg_sq) follow the rows: zero for
new rows (clones too, as in 3DGS: a clone with fresh moments moves away from its parent
instead of in lockstep with it), dropped for removed rows. Scalar state ("step") is kept.
A pending `.grad` follows the same rule, so the caller may step the optimizer right after.
An optimizer that has not stepped yet has no state; then only the Parameter is swapped.

Optional `state`: a strategy's per-Gaussian tensors (first dim N) resized with the same rule.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import torch

from gsexp.gaussians.geometry import quat_to_rotmat

Fn = Callable[[torch.Tensor], torch.Tensor]


def _num(params: dict) -> int:
    return next(iter(params.values())).shape[0]


def _replace(params: dict, optimizers: dict, name: str, value: torch.Tensor, rows: Fn) -> None:
    """Swap params[name] for `value`; `rows` maps each row-aligned optimizer state tensor."""
    old = params[name]
    new = torch.nn.Parameter(value.detach().contiguous(), requires_grad=old.requires_grad)
    if old.grad is not None:  # so an optimizer step right after surgery still applies
        new.grad = rows(old.grad).contiguous()
    params[name] = new
    opt = optimizers.get(name)
    if opt is None:
        return
    for group in opt.param_groups:
        group["params"] = [new if p is old else p for p in group["params"]]
    old_state = opt.state.pop(old, None)
    if old_state:
        opt.state[new] = {k: rows(v) if torch.is_tensor(v) and v.shape == old.shape else v
                          for k, v in old_state.items()}


def _edit(params: dict, optimizers: dict, values: Callable[[str, torch.Tensor], torch.Tensor],
          rows: Fn, state: dict | None = None, state_rows: Fn | None = None) -> None:
    """`rows` maps optimizer moments and pending grads; `state_rows` (default: `rows`) the
    strategy's per-Gaussian state."""
    n = _num(params)
    with torch.no_grad():
        for name in list(params):
            _replace(params, optimizers, name, values(name, params[name]), rows)
        if state is not None:
            for key, v in state.items():
                if torch.is_tensor(v) and v.dim() >= 1 and v.shape[0] == n:
                    state[key] = (state_rows or rows)(v)


def _rows_kept(mask: torch.Tensor) -> torch.Tensor:
    """The unmasked rows' indices. Found once: indexing each of the ~30 tensors an edit touches
    with the boolean mask would ask the GPU for the count each time (a host sync apiece)."""
    return (~mask).nonzero().squeeze(1)


def _zeros(v: torch.Tensor, n: int) -> torch.Tensor:
    return v.new_zeros((n, *v.shape[1:]))


def duplicate(params: dict, optimizers: dict, mask: torch.Tensor, state: dict | None = None) -> None:
    """Append an exact copy of every masked Gaussian (3DGS clone). The copies start with zero
    Adam moments and gradient (as in 3DGS and gsplat); strategy state rows are copied."""
    idx = mask.nonzero().squeeze(1)
    copy_rows = lambda v: torch.cat([v, v[idx]])  # noqa: E731
    zero_rows = lambda v: torch.cat([v, _zeros(v, len(idx))])  # noqa: E731
    _edit(params, optimizers, lambda _, p: copy_rows(p), zero_rows, state, state_rows=copy_rows)


def remove(params: dict, optimizers: dict, mask: torch.Tensor, state: dict | None = None) -> None:
    """Drop every masked Gaussian."""
    keep = _rows_kept(mask)
    _edit(params, optimizers, lambda _, p: p[keep], lambda v: v[keep], state)


def split(params: dict, optimizers: dict, mask: torch.Tensor, n: int = 2, state: dict | None = None,
          generator: torch.Generator | None = None) -> None:
    """3DGS split: each masked Gaussian becomes `n` children, appended after the survivors.

    Children are centred on samples of the parent's own distribution N(mean, R diag(s)^2 R^T)
    and shrunk to s / (0.8 n) so together they cover about the parent's footprint; colour,
    opacity and rotation are inherited. Their Adam rows start at zero.
    """
    idx = mask.nonzero().squeeze(1)
    m = idx.numel()
    keep = _rows_kept(mask)
    scales = params["log_scales"][idx].detach().exp()
    rot = quat_to_rotmat(params["quats"][idx].detach())
    eps = torch.randn((n, m, 3), generator=generator, device=scales.device, dtype=scales.dtype)
    offsets = torch.einsum("mij,nmj->nmi", rot, eps * scales).reshape(n * m, 3)

    def values(name: str, p: torch.Tensor) -> torch.Tensor:
        parent = p[idx]
        if name == "means":
            child = parent.repeat(n, 1) + offsets
        elif name == "log_scales":
            child = (parent - math.log(0.8 * n)).repeat(n, 1)
        else:
            child = parent.repeat(n, *([1] * (p.dim() - 1)))
        return torch.cat([p[keep], child])

    _edit(params, optimizers, values, lambda v: torch.cat([v[keep], _zeros(v, n * m)]), state)


def reset_opacity(params: dict, optimizers: dict, value: float, factor: torch.Tensor | None = None) -> None:
    """Clamp every opacity to at most `value` and forget the opacity group's Adam moments.
    factor: [N] what rendering multiplies each opacity by (model.filter_3d's compensation, <= 1);
    the clamp then applies to the opacity as rendered, as Mip-Splatting resets."""
    logits = params["opacity_logits"].detach()
    if factor is None:
        cap = math.log(value / (1 - value))  # logit
    else:  # o * factor <= value, i.e. o <= value / factor; none where that is 1 or more
        ratio = value / factor.to(logits).clamp_min(1e-30)
        cap = torch.where(ratio < 1, torch.logit(ratio.clamp(max=1 - 1e-7)), math.inf)
    _replace(params, optimizers, "opacity_logits", logits.clamp(max=cap), torch.zeros_like)


# --- MCMC (Kheradmand et al. 2024) ---------------------------------------------------------

@functools.lru_cache(maxsize=4)
def _binomials(n_max: int) -> torch.Tensor:
    """[n_max + 1, n_max]: row N, column j - 1 holds C(N, j)."""
    return torch.tensor([[math.comb(row, j) for j in range(1, n_max + 1)] for row in range(n_max + 1)],
                        dtype=torch.float64)


def relocation_adjustment(opacity: torch.Tensor, copies: torch.Tensor, n_max: int = 51):
    """New opacity and scale factor for a Gaussian shared by `copies` identical Gaussians.

    The paper asks that `copies` = N stacked Gaussians (opacity o', scale c * s) render like
    the original (o, s). Opacity: 1 - (1 - o')^N = o at the centre, so o' = 1 - (1 - o)^(1/N).
    Scale: match the integrated alpha along a line, 1 - prod(1 - o' g^N) expanded binomially
    (g a unit Gaussian; integral of g^j is proportional to 1/sqrt(j)):
        c * sum_{i=1..N} sum_{k<i} C(i-1, k) (-1)^k o'^(k+1) / sqrt(k+1) = o,
    whose double sum collapses (hockey stick) to sum_{j=1..N} C(N, j) (-1)^(j-1) o'^j / sqrt(j).
    `copies` is clamped to n_max; float64 keeps the alternating sum accurate.
    """
    o = opacity.double().clamp(1e-12, 1 - 1e-12)
    big_n = copies.clamp(1, n_max).to(o.device)
    new_o = 1 - (1 - o) ** (1.0 / big_n.double())
    j = torch.arange(1, n_max + 1, device=o.device, dtype=torch.float64)
    sign = 1 - 2 * ((j - 1) % 2)
    binom = _binomials(n_max).to(o.device)[big_n]  # C(N, j), zero for j > N
    terms = binom * sign * new_o[:, None] ** j / j.sqrt()
    return new_o.to(opacity.dtype), (o / terms.sum(1)).to(opacity.dtype)


def _share(params: dict, sources: torch.Tensor, min_opacity: float, n_max: int) -> tuple:
    """Opacity logits / log scales after each source gains bincount(sources) copies."""
    logits, log_scales = params["opacity_logits"].detach(), params["log_scales"].detach()
    counts = torch.bincount(sources, minlength=logits.shape[0])
    src = counts.nonzero().squeeze(1)
    new_o, factor = relocation_adjustment(torch.sigmoid(logits[src]), counts[src] + 1, n_max)
    new_o = new_o.clamp(min_opacity, 1 - 1e-6)
    logits, log_scales = logits.clone(), log_scales.clone()
    logits[src] = torch.logit(new_o)
    log_scales[src] += factor.log().unsqueeze(1)
    return logits, log_scales, src


def _sample(weights: torch.Tensor, n: int, generator: torch.Generator | None) -> torch.Tensor:
    return torch.multinomial(weights.float().clamp_min(0) + 1e-12, n, replacement=True, generator=generator)


def relocate(params: dict, optimizers: dict, dead: torch.Tensor, min_opacity: float = 0.005,
             n_max: int = 51, generator: torch.Generator | None = None) -> int:
    """Move every `dead` Gaussian onto a live one drawn in proportion to opacity (count kept).

    The source and its copies share its opacity/footprint (`relocation_adjustment`); Adam
    rows of sources and destinations restart at zero. Returns the number relocated.
    """
    dead_idx = dead.nonzero().squeeze(1)
    alive_idx = (~dead).nonzero().squeeze(1)
    if dead_idx.numel() == 0 or alive_idx.numel() == 0:
        return 0
    opacity = torch.sigmoid(params["opacity_logits"].detach()[alive_idx])
    sources = alive_idx[_sample(opacity, dead_idx.numel(), generator)]
    logits, log_scales, src = _share(params, sources, min_opacity, n_max)
    touched = torch.cat([src, dead_idx])

    def values(name: str, p: torch.Tensor) -> torch.Tensor:
        p = {"opacity_logits": logits, "log_scales": log_scales}.get(name, p.detach()).clone()
        p[dead_idx] = p[sources]
        return p

    def rows(v: torch.Tensor) -> torch.Tensor:
        v = v.clone()
        v[touched] = 0
        return v

    _edit(params, optimizers, values, rows)
    return dead_idx.numel()


def add(params: dict, optimizers: dict, n_new: int, min_opacity: float = 0.005, n_max: int = 51,
        generator: torch.Generator | None = None) -> int:
    """Append `n_new` copies of Gaussians drawn in proportion to opacity (MCMC growth)."""
    if n_new <= 0:
        return 0
    sources = _sample(torch.sigmoid(params["opacity_logits"].detach()), n_new, generator)
    logits, log_scales, src = _share(params, sources, min_opacity, n_max)

    def values(name: str, p: torch.Tensor) -> torch.Tensor:
        p = {"opacity_logits": logits, "log_scales": log_scales}.get(name, p.detach())
        return torch.cat([p, p[sources]])

    def rows(v: torch.Tensor) -> torch.Tensor:
        v = v.clone()
        v[src] = 0
        return torch.cat([v, _zeros(v, n_new)])

    _edit(params, optimizers, values, rows)
    return n_new
