"""The CUDA rasterizer (csrc/): staged forward, pluggable blend, one exact fp32 backward."""
from __future__ import annotations

import torch

from gsexp.render.cuda.build import CudaUnavailable, load
from gsexp.render.cuda.function import Rasterize, camera_values

__all__ = ["rasterize", "load", "CudaUnavailable"]

CUDA_BLENDS = ("vanilla",)


def rasterize(gaussians, camera, *, blend: str, precision: str, background: torch.Tensor,
              sh_degree: int | None, timing: bool):
    """Returns (image, alpha, n_contrib, radii, means2d, depths, stage_ms); means2d is a leaf
    whose .grad is the screen-space gradient after backward."""
    if blend not in CUDA_BLENDS:
        raise ValueError(f"render(backend='cuda'): blend {blend!r} has no CUDA kernel yet; "
                         f"available: {', '.join(CUDA_BLENDS)} (backend='torch' has every blend)")
    if precision != "fp32":
        raise ValueError(f"render(backend='cuda'): blend={blend!r} runs in fp32; precision={precision!r} "
                         "applies to the tensor-core blends")
    means = gaussians.means
    if means.device.type != "cuda":
        raise CudaUnavailable(f"render(backend='cuda') needs the Gaussians on a CUDA device, got {means.device}; "
                              "move them with .to('cuda'), or use rasterizer=torch (backend='torch') on the CPU")
    degree = gaussians.sh_degree if sh_degree is None else min(sh_degree, gaussians.sh_degree)
    settings = {"degree": degree, "camera": camera_values(camera), "background": background.contiguous(),
                "blend": blend, "timing": timing, "stage_ms": {}}
    quats = torch.nn.functional.normalize(gaussians.quats, dim=-1)
    holder = torch.zeros(len(means), 2, device=means.device, requires_grad=torch.is_grad_enabled())
    image, alpha, n_contrib, radii, means2d, depths = Rasterize.apply(
        means.float().contiguous(), gaussians.scales.float().contiguous(), quats.float().contiguous(),
        gaussians.opacities.float().contiguous(), gaussians.sh.float().contiguous(), holder, settings)
    with torch.no_grad():
        holder.copy_(means2d)
    return image, alpha, n_contrib, radii, holder, depths, settings["stage_ms"]
