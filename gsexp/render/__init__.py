"""`render()`: the one dispatch point from config to a rasterizer backend."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch

from gsexp.render import reference
from gsexp.render.constants import BACKENDS


@dataclass
class RenderOutput:
    image: torch.Tensor      # [3,H,W]
    alpha: torch.Tensor      # [H,W], 1 - final transmittance
    n_contrib: torch.Tensor  # [H,W] int32, position of the last contributor in its tile list
    radii: torch.Tensor      # [N] int32, 0 for culled Gaussians
    means2d: torch.Tensor    # [N,2] pixel coordinates; .grad after backward (densification)
    depths: torch.Tensor     # [N] view-space z
    stage_ms: dict = field(default_factory=dict)
    num_pairs: int = 0       # (tile, Gaussian) pairs the blend read

    @property
    def visible(self) -> torch.Tensor:
        return self.radii > 0


@functools.lru_cache(maxsize=32)
def _cached_background(values: tuple, device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


def background_tensor(background, device: torch.device) -> torch.Tensor:
    """A tuple background becomes a device tensor once, not a host-to-device copy per render."""
    if isinstance(background, (tuple, list)) and all(isinstance(v, (int, float)) for v in background):
        return _cached_background(tuple(float(v) for v in background), device)
    return torch.as_tensor(background, dtype=torch.float32, device=device)


def render(gaussians, camera, *, backend: str = "torch", blend: str = "vanilla",
           precision: str = "fp32", g2l: bool = True, early_cull: bool = True,
           background=(0.0, 0.0, 0.0), sh_degree: int | None = None, timing: bool = False,
           batch: int = 128, half_blend: bool = False, intersect: str = "aabb") -> RenderOutput:
    """Render `gaussians` from `camera`.

    blend: vanilla | gemm (GEMM-GS) | tcgs (TC-GS); precision: fp32 | tf32 | fp16 operands
    for gemm/tcgs; g2l: tile-local pixel coordinates for gemm/tcgs; early_cull: tcgs culls
    in the log domain before the exp. sh_degree: SH bands to use (default: all stored).
    batch: Gaussians per pipeline stage of the CUDA matrix blends (32, 64 or 128; no effect
    on the image).
    half_blend: tcgs accumulates T and colour in fp16, as TC-GS's code (the torch reference
    emulates it for rendering only).
    intersect: which tiles get a Gaussian's entries: aabb (vanilla's 3-sigma square), snugbox
    (the exact box of the ellipse where alpha reaches 1/255), accutile (only the tiles that
    ellipse touches). The tight ones also cull Gaussians with opacity < 1/255.
    """
    if backend not in BACKENDS:
        raise ValueError(f"render: unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
    bg = background_tensor(background, gaussians.means.device)
    if bg.shape != (3,):
        raise ValueError(f"render: background must be 3 values (r, g, b), got shape {tuple(bg.shape)}")
    if backend == "cuda":
        from gsexp.render import cuda

        *out, stage_ms, num_pairs = cuda.rasterize(
            gaussians, camera, blend=blend, precision=precision, g2l=g2l, early_cull=early_cull, batch=batch,
            half_blend=half_blend, background=bg, sh_degree=sh_degree, timing=timing, intersect=intersect)
        return RenderOutput(*out, stage_ms, num_pairs)
    camera = camera.to(gaussians.means.device)
    image, alpha, n_contrib, proj, stage_ms, num_pairs = reference.rasterize(
        gaussians, camera, blend_name=blend, precision=precision, g2l=g2l,
        early_cull=early_cull, half_blend=half_blend, background=bg, sh_degree=sh_degree, intersect=intersect)
    if proj.means2d.requires_grad:
        proj.means2d.retain_grad()
    return RenderOutput(image, alpha, n_contrib, proj.radii, proj.means2d, proj.depths, stage_ms, num_pairs)
