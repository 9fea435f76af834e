"""Compression variants, each a small component the training recipe calls at fixed points:

    gaussians = to_gaussians(params, degree)       # what is rendered
    compression.post_backward(params, state)       # after backward, before the optimizer steps
    compression.step(params, optimizers, state, step, cameras)   # after each optimizer step
    arrays = compression.finalize(params, cameras, degree, state)  # at the end: the compressed file's arrays

none: nothing. prune: LightGaussian's global-significance pruning once at `at_step`, then the
rest of the run fine-tunes. vq: the SH rest of the least significant `fraction` of Gaussians
goes to a significance-weighted k-means codebook, everything but positions to fp16; at the
end, or at `vq_step`, after which the quantised rows stay fixed and the rest of the model
fine-tunes around them. prune_vq: both. mask: Compact-3DGS's learnable mask. The compressed
file's format is in gsexp/compress/format.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from gsexp.compress import format as fmt
from gsexp.compress.significance import significance
from gsexp.compress.vq import kmeans
from gsexp.gaussians.sh import sh_degree_of
from gsexp.train.params import to_gaussians
from gsexp.train.strategy import ops
from gsexp.train.strategy.base import REFERENCE_ITERATIONS


def _steps(value: int, total_iterations: int) -> int:
    """A step count written for a 30K-step run, scaled to `total_iterations` (>= 1)."""
    return max(1, round(value * total_iterations / REFERENCE_ITERATIONS))


@dataclass
class NoCompression:
    def scaled(self, total_iterations: int) -> "NoCompression":
        return self

    def setup(self, params, optimizers) -> None:
        """Add the variant's own parameters (and their optimizers)."""

    def gaussians(self, params, sh_degree: int):
        """The Gaussians to render from the parameters (differentiable)."""
        return to_gaussians(params, sh_degree)

    def regularization(self, params):
        return 0.0

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        pass

    def post_backward(self, params, state) -> None:
        """After `loss.backward()`, before the optimizer steps (e.g. hold rows fixed)."""

    def finalize(self, params, cameras, sh_degree: int, state: dict | None = None):
        """Arrays of the compressed file, or None when this variant writes none."""
        return None


@dataclass
class Prune(NoCompression):
    ratio: float = 0.66      # share of the Gaussians removed in all
    beta: float = 0.1        # volume exponent of the significance
    # The step, or increasing steps, to prune at (for a 30K-step run, scaled); the remaining
    # steps fine-tune. With several, each removes the same share of what is left, so that
    # `ratio` is removed in all (LightGaussian's pruning in rounds).
    at_step: int | tuple[int, ...] = 25_000

    def __post_init__(self):
        if not 0 <= self.ratio < 1:
            raise ValueError(f"compress prune: ratio must be in [0, 1), got {self.ratio}")
        steps = self.steps()
        if not steps or any(not isinstance(s, int) or s < 1 for s in steps) or list(steps) != sorted(set(steps)):
            raise ValueError(f"compress prune: at_step must be a step >= 1 or a list of increasing steps, "
                             f"got {self.at_step!r}")

    def steps(self) -> tuple[int, ...]:
        return tuple(self.at_step) if isinstance(self.at_step, (list, tuple)) else (self.at_step,)

    def share(self) -> float:
        """The share of the remaining Gaussians each round removes."""
        rounds = len(self.steps())
        return self.ratio if rounds == 1 else 1 - (1 - self.ratio) ** (1 / rounds)

    def scaled(self, total_iterations: int) -> "Prune":
        return dataclasses.replace(self, at_step=self.scaled_at_step(total_iterations))

    def scaled_at_step(self, total_iterations: int):
        steps = sorted({_steps(s, total_iterations) for s in self.steps()})  # short runs may merge rounds
        return steps[0] if len(steps) == 1 else tuple(steps)

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        if step + 1 not in self.steps():
            return
        with torch.no_grad():
            score = significance(to_gaussians(params, sh_degree_of(1 + params["shN"].shape[1])), cameras, self.beta)
        drop = torch.zeros(len(score), dtype=torch.bool, device=score.device)
        drop[torch.argsort(score)[: int(self.share() * len(score))]] = True
        ops.remove(params, optimizers, drop.to(params["means"].device), state)


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


@dataclass
class PruneVQ(Prune):
    codes: int = 8192
    fraction: float = 0.6
    iterations: int = 10
    position_bits: int = 32
    vq_step: int | None = None

    def __post_init__(self):
        super().__post_init__()
        self.vq()  # its checks, before training
        if self.vq_step is not None and self.vq_step <= max(self.steps()):
            raise ValueError(f"compress prune_vq: vq_step ({self.vq_step}) must come after the last prune "
                             f"(at_step {self.at_step})")

    def vq(self) -> VectorQuantize:
        return VectorQuantize(self.codes, self.fraction, self.beta, self.iterations, self.position_bits,
                              self.vq_step)

    def scaled(self, total_iterations: int) -> "PruneVQ":
        return dataclasses.replace(self, at_step=self.scaled_at_step(total_iterations),
                                   vq_step=self.vq().scaled(total_iterations).vq_step)

    def step(self, params, optimizers, state, step: int, cameras) -> None:
        super().step(params, optimizers, state, step, cameras)
        self.vq().step(params, optimizers, state, step, cameras)

    def post_backward(self, params, state) -> None:
        self.vq().post_backward(params, state)

    def finalize(self, params, cameras, sh_degree: int, state: dict | None = None):
        return self.vq().finalize(params, cameras, sh_degree, state)


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
        optimizers["mask_logits"] = torch.optim.Adam(
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
            ops.remove(params, optimizers, drop, state)


COMPRESSIONS = {"none": NoCompression, "prune": Prune, "vq": VectorQuantize, "prune_vq": PruneVQ, "mask": Mask}


def make_compression(name: str, **options):
    if name not in COMPRESSIONS:
        raise ValueError(f"compress: unknown variant {name!r}; options: {', '.join(COMPRESSIONS)}")
    cls = COMPRESSIONS[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = set(options) - fields
    if unknown:
        raise ValueError(f"compress {name}: no option(s) {sorted(unknown)}; options: {sorted(fields)}")
    return cls(**options)
