"""`render()`: the one entry from rasterizer settings to a backend.

    render(gaussians, camera, settings, background=(1, 1, 1))

`settings` is a RasterSettings (gsexp.render.settings): its class picks the backend
(reference: the pure-PyTorch rasterizer; cuda: csrc/), its fields the switches. Each backend
module implements `rasterize(gaussians, camera, settings, background, sh_degree) ->
RenderOutput` and `hit_counts(gaussians, camera, settings)`.
"""
from __future__ import annotations

import functools
import importlib

import torch

from gsexp.render.output import STAGES, RenderOutput
from gsexp.render.settings import RasterSettings, from_keywords, make_settings

__all__ = ["render", "hit_counts", "RenderOutput", "RasterSettings", "make_settings", "STAGES"]

_BACKENDS = {"torch": "gsexp.render.reference", "cuda": "gsexp.render.cuda"}


def backend_of(settings: RasterSettings):
    return importlib.import_module(_BACKENDS[settings.backend])


@functools.lru_cache(maxsize=32)
def _cached_background(values: tuple, device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


def background_tensor(background, device: torch.device) -> torch.Tensor:
    """A tuple background becomes a device tensor once, not a host-to-device copy per render."""
    if isinstance(background, (tuple, list)) and all(isinstance(v, (int, float)) for v in background):
        bg = _cached_background(tuple(float(v) for v in background), device)
    else:
        bg = torch.as_tensor(background, dtype=torch.float32, device=device)
    if bg.shape != (3,):
        raise ValueError(f"render: background must be 3 values (r, g, b), got shape {tuple(bg.shape)}")
    return bg


def render(gaussians, camera, settings: RasterSettings | None = None, *, background=(0.0, 0.0, 0.0),
           sh_degree: int | None = None, capacity: int | None = None, **keywords) -> RenderOutput:
    """Render `gaussians` from `camera` with `settings` (default: the reference, vanilla).

    Without `settings`, keywords build them: backend (torch | cuda), blend (vanilla | gemm |
    tcgs) and the variant's switches, e.g. render(g, cam, backend="cuda", blend="tcgs",
    intersect="accutile"). sh_degree: SH bands to use (default: all stored).
    `out.means2d.grad` after backward() is the screen-space gradient.
    capacity (CUDA): size the (tile, Gaussian) pair buffers instead of reading the pair count
    back, which spares a host sync; `out.num_pairs` is then a device tensor, and pairs past the
    capacity are dropped, so check it (gsexp.train.pairs does, for training).
    """
    if settings is None:
        settings = from_keywords(**keywords)
    elif keywords:
        raise TypeError(f"render: pass switches in the settings object, not as keywords ({', '.join(keywords)})")
    bg = background_tensor(background, gaussians.means.device)
    return backend_of(settings).rasterize(gaussians, camera, settings, bg, sh_degree, capacity)


def hit_counts(gaussians, camera, settings: RasterSettings | None = None,
               pixel_mask: torch.Tensor | None = None) -> torch.Tensor:
    """[N] int64: how many pixels of `camera` each Gaussian contributes to (alpha >= 1/255
    before the pixel's transmittance ran out, vanilla's rule), on the settings' backend and
    tile sets (default: the reference). pixel_mask: an [H, W] bool tensor; then only the
    pixels it marks count (FastGS's high-error pixels, gsexp/train/strategy/fastgs.py)."""
    settings = settings or make_settings("torch")
    if pixel_mask is not None and tuple(pixel_mask.shape) != (camera.height, camera.width):
        raise ValueError(f"hit_counts: pixel_mask has shape {tuple(pixel_mask.shape)}, the camera's image is "
                         f"{camera.height}x{camera.width} (height x width)")
    return backend_of(settings).hit_counts(gaussians, camera, settings, pixel_mask)
