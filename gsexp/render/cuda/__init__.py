"""The CUDA rasterizer (csrc/): staged forward, one blend kernel per variant, one exact fp32
backward. The backend interface as gsexp.render.reference: rasterize() and hit_counts()."""
from __future__ import annotations

import torch

from gsexp.render.cuda.build import CudaUnavailable, load
from gsexp.render.cuda.function import Rasterize, camera_values
from gsexp.render.output import RenderOutput
from gsexp.render.settings import VanillaSettings, counting_settings

__all__ = ["rasterize", "hit_counts", "load", "CudaUnavailable", "options_of"]


def raw_params(gaussians) -> list:
    """The parameters as the kernels read them: raw (they apply the activations), fp32, contiguous;
    SH as one array and None, or as training's two parts (gsexp.gaussians.params.to_gaussians)."""
    sh = getattr(gaussians, "sh_parts", None) or (gaussians.sh, None)
    return [t if t is None else t.float().contiguous() for t in (
        gaussians.means, gaussians.log_scales, gaussians.quats, gaussians.opacity_logits, *sh)]


def options_of(settings):
    """The C++ RasterOptions of `settings`, field by field by name (frozen settings: built once
    and kept on them). A switch reaches the kernels by having a field of that name there."""
    cached = settings.__dict__.get("_options")
    if cached is not None:
        return cached
    ext = load()
    ids = {"blend": ext.blend_ids, "precision": ext.precision_ids, "intersect": ext.intersect_ids,
           "backward": ext.backward_ids, "tile_split": ext.tile_split_ids}
    o = ext.RasterOptions()
    for key, value in {**settings.formula, **settings.switches()}.items():
        if hasattr(o, key):
            setattr(o, key, ids[key][value] if key in ids else value)
    o.heavy_first = settings.tile_order == "heavy_first"
    object.__setattr__(settings, "_options", o)
    return o


def _check_device(gaussians, what: str):
    if gaussians.means.device.type != "cuda":
        raise CudaUnavailable(f"{what} needs the Gaussians on a CUDA device, got {gaussians.means.device}; "
                              "move them with .to('cuda'), or use rasterizer=torch on the CPU")


def rasterize(gaussians, camera, settings, background: torch.Tensor, sh_degree: int | None = None,
              capacity: int | None = None) -> RenderOutput:
    """means2d is a leaf whose .grad is the screen-space gradient after backward. capacity:
    pair buffers of that size instead of reading the count back (see render())."""
    _check_device(gaussians, f"rasterizer={settings.name}")
    means = gaussians.means
    degree = gaussians.sh_degree if sh_degree is None else min(sh_degree, gaussians.sh_degree)
    call = {"degree": degree, "camera": camera_values(camera), "background": background.contiguous(),
            "options": options_of(settings), "capacity": int(capacity or 0), "stage_ms": {},
            "absgrad": torch.zeros(len(means), 2, device=means.device) if settings.absgrad else None}
    # Filled by the kernel (no memset); a leaf so that .grad is the screen-space gradient.
    holder = torch.empty(len(means), 2, device=means.device, requires_grad=torch.is_grad_enabled())
    image, alpha, n_contrib, radii, depths, accumulated = Rasterize.apply(*raw_params(gaussians), holder, call)
    depth = None if accumulated is None else accumulated / alpha.clamp_min(1e-10)  # as the reference: 0 where empty
    return RenderOutput(image, alpha, n_contrib, radii, holder, depths, call["stage_ms"], call["num_pairs"],
                        depth, accumulated, means2d_absgrad=call["absgrad"])


@torch.no_grad()
def hit_counts(gaussians, camera, settings=None, pixel_mask=None) -> torch.Tensor:
    """[N] int64: how many pixels of `camera` each Gaussian contributes to (alpha >= 1/255
    before the pixel's transmittance ran out; with pixel_mask [H, W] only the pixels it marks),
    counted by the vanilla blend itself on the settings' tile sets."""
    _check_device(gaussians, "hit_counts")
    means = gaussians.means
    counts = torch.zeros(len(means), dtype=torch.int32, device=means.device)
    vanilla = counting_settings(settings) if settings else VanillaSettings()
    raw = [t if t is None else t.detach() for t in raw_params(gaussians)]
    means2d = torch.empty(len(means), 2, device=means.device)
    background = torch.zeros(3, device=means.device)
    mask = None if pixel_mask is None else pixel_mask.to(means.device, torch.uint8).contiguous()
    load().rasterize_forward(*raw, means2d, gaussians.sh_degree, camera_values(camera), background,
                             options_of(vanilla), 0, counts, mask)
    return counts.long()
