"""The CUDA rasterizer (csrc/): staged forward, pluggable blend, one exact fp32 backward."""
from __future__ import annotations

import torch

from gsexp.render.constants import INTERSECTS
from gsexp.render.cuda.build import CudaUnavailable, load
from gsexp.render.cuda.function import Rasterize, camera_values

__all__ = ["rasterize", "hit_counts", "load", "CudaUnavailable"]

BATCHES = (32, 64, 128)  # Gaussians per pipeline stage of the matrix blends


def raw_params(gaussians) -> list[torch.Tensor]:
    """The parameters as the kernels read them: raw (they apply the activations), fp32, contiguous."""
    return [t.float().contiguous() for t in (gaussians.means, gaussians.log_scales, gaussians.quats,
                                             gaussians.opacity_logits, gaussians.sh)]


def rasterize(gaussians, camera, *, blend: str, precision: str, g2l: bool, early_cull: bool, batch: int,
              half_blend: bool, background: torch.Tensor, sh_degree: int | None, timing: bool,
              intersect: str = "aabb"):
    """Returns (image, alpha, n_contrib, radii, means2d, depths, stage_ms, num_pairs); means2d is
    a leaf whose .grad is the screen-space gradient after backward."""
    if blend == "vanilla" and precision != "fp32":
        raise ValueError(f"render(backend='cuda'): blend='vanilla' runs in fp32; precision={precision!r} "
                         "applies to blend='gemm' or 'tcgs'")
    if half_blend and blend != "tcgs":
        raise ValueError(f"render(backend='cuda'): half_blend (TC-GS's fp16 accumulation) applies to blend='tcgs', "
                         f"not {blend!r}")
    if batch not in BATCHES:
        raise ValueError(f"render(backend='cuda'): batch must be one of {BATCHES}, got {batch!r}")
    if intersect not in INTERSECTS:
        raise ValueError(f"render(backend='cuda'): intersect must be one of {INTERSECTS}, got {intersect!r}")
    means = gaussians.means
    if means.device.type != "cuda":
        raise CudaUnavailable(f"render(backend='cuda') needs the Gaussians on a CUDA device, got {means.device}; "
                              "move them with .to('cuda'), or use rasterizer=torch (backend='torch') on the CPU")
    degree = gaussians.sh_degree if sh_degree is None else min(sh_degree, gaussians.sh_degree)
    settings = {"degree": degree, "camera": camera_values(camera), "background": background.contiguous(),
                "blend": blend, "precision": precision, "g2l": bool(g2l), "early_cull": bool(early_cull),
                "batch": int(batch), "half_blend": bool(half_blend), "intersect": intersect, "timing": timing,
                "stage_ms": {}}
    # Filled by the kernel (no memset); a leaf so that .grad is the screen-space gradient.
    holder = torch.empty(len(means), 2, device=means.device, requires_grad=torch.is_grad_enabled())
    image, alpha, n_contrib, radii, depths = Rasterize.apply(*raw_params(gaussians), holder, settings)
    return image, alpha, n_contrib, radii, holder, depths, settings["stage_ms"], settings["num_pairs"]


@torch.no_grad()
def hit_counts(gaussians, camera) -> torch.Tensor:
    """[N] int64: how many pixels of `camera` each Gaussian contributes to (alpha >= 1/255
    before the pixel's transmittance ran out), counted by the vanilla blend itself."""
    means = gaussians.means
    if means.device.type != "cuda":
        raise CudaUnavailable(f"hit_counts: the Gaussians are on {means.device}, not a CUDA device")
    counts = torch.zeros(len(means), dtype=torch.int32, device=means.device)
    raw = [t.detach() for t in raw_params(gaussians)]
    means2d = torch.empty(len(means), 2, device=means.device)
    background = torch.zeros(3, device=means.device)
    load().rasterize_forward(*raw, means2d, gaussians.sh_degree, camera_values(camera), background, "vanilla",
                             "fp32", True, True, max(BATCHES), False, "aabb", False, counts)  # the switches vanilla ignores
    return counts.long()
