"""Pure-PyTorch reference rasterizer: readable, differentiable, CPU or CUDA. The same
backend interface as gsexp.render.cuda: rasterize() and hit_counts()."""
from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager

import torch

from gsexp.render.constants import TILE_SIZE
from gsexp.render.output import RenderOutput
from gsexp.render.reference.blend import blend, blend_forward
from gsexp.render.reference.formulas import make_formula
from gsexp.render.reference.preprocess import Projected, preprocess
from gsexp.render.reference.tiles import TileLists, duplicate, sort_pairs, tile_lists, tile_ranges

__all__ = ["rasterize", "hit_counts", "preprocess", "duplicate", "sort_pairs", "tile_ranges", "tile_lists", "blend",
           "make_formula", "Projected", "TileLists"]


def _sync(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


@contextmanager
def _timed(stage_ms: dict | None, name: str, device: torch.device):
    if stage_ms is None:
        yield
        return
    start = _sync(device)
    yield
    stage_ms[name] = (_sync(device) - start) * 1e3


class _BackwardClock(torch.autograd.Function):
    """Identity whose backward notes the time: wrapped around the outputs it marks the start
    of the backward, around the inputs its end, so the reference reports "backward" too."""

    @staticmethod
    def forward(ctx, stage_ms, device, at_start, *xs):
        ctx.stage_ms, ctx.device, ctx.at_start = stage_ms, device, at_start
        return tuple(x.view_as(x) for x in xs)

    @staticmethod
    def backward(ctx, *grads):
        now = _sync(ctx.device)
        if ctx.at_start:
            ctx.stage_ms["_backward_start"] = now
        elif "_backward_start" in ctx.stage_ms:
            ctx.stage_ms["backward"] = (now - ctx.stage_ms.pop("_backward_start")) * 1e3
        return (None, None, None, *grads)


def _clock_inputs(gaussians, stage_ms, device):
    names = gaussians.TENSORS
    xs = [getattr(gaussians, n) for n in names]
    if not any(x.requires_grad for x in xs):
        return gaussians
    return dataclasses.replace(gaussians, **dict(zip(names, _BackwardClock.apply(stage_ms, device, False, *xs))))


def rasterize(gaussians, camera, settings, background: torch.Tensor, sh_degree: int | None = None,
              capacity: int | None = None) -> RenderOutput:
    """Preprocess, duplicate, sort, ranges, blend, as the CUDA stages (`settings`: TorchSettings).
    capacity: ignored (the reference's buffers always fit)."""
    device = gaussians.means.device
    camera = camera.to(device)
    formula = make_formula(**settings.formula)
    stage_ms: dict = {}
    timed = stage_ms if settings.timing else None
    if settings.timing:
        gaussians = _clock_inputs(gaussians, stage_ms, device)
    with _timed(timed, "preprocess", device):
        proj = preprocess(gaussians, camera, sh_degree, settings.intersect, settings.antialiased,
                          settings.dilation)
    with _timed(timed, "duplicate", device):
        gauss_ids, tile_xy = duplicate(proj)
    with _timed(timed, "sort", device):
        gauss_ids, tile_ids = sort_pairs(proj, gauss_ids, tile_xy, camera.width)
    with _timed(timed, "ranges", device):
        tiles = tile_ranges(gauss_ids, tile_ids, camera.width, camera.height)
    with _timed(timed, "blend", device):
        absgrad = torch.zeros_like(proj.means2d, requires_grad=False) if settings.absgrad else None
        image, alpha, n_contrib = blend(proj, tiles, formula, camera.width, camera.height, background, settings.depth,
                                        absgrad)
    depth = depth_accumulated = None
    if settings.depth:
        image, depth_accumulated = image[:3], image[3]
        depth = depth_accumulated / alpha.clamp_min(1e-10)  # gsplat's "ED"; 0 where nothing was drawn
    if settings.timing and image.requires_grad:
        image, alpha = _BackwardClock.apply(stage_ms, device, True, image, alpha)
    if proj.means2d.requires_grad:
        proj.means2d.retain_grad()  # .grad: the screen-space gradient, as the CUDA backend's leaf
    return RenderOutput(image, alpha, n_contrib, proj.radii, proj.means2d, proj.depths, stage_ms, len(gauss_ids),
                        depth, depth_accumulated, absgrad)


@torch.no_grad()
def hit_counts(gaussians, camera, settings, pixel_mask=None) -> torch.Tensor:
    """[N] int64 pixels each Gaussian contributes to under vanilla's rules, on the settings' tiles
    (with pixel_mask [H, W], only the pixels it marks)."""
    camera = camera.to(gaussians.means.device)
    proj = preprocess(gaussians, camera, intersect=settings.intersect, antialiased=settings.antialiased,
                      dilation=settings.dilation)
    tiles = tile_lists(proj, camera.width, camera.height)
    counts = torch.zeros(len(gaussians), dtype=torch.long, device=gaussians.means.device)
    *_, rounds = blend_forward(proj.means2d, proj.conics, proj.opacities, proj.colors, tiles,
                               make_formula("vanilla"), camera.width, camera.height, keep_entries=True)
    marked = None
    if pixel_mask is not None:  # [tiles * 256] in tile-pixel order (tile * 256 + y * 16 + x)
        padded = torch.zeros(tiles.tiles_y * TILE_SIZE, tiles.tiles_x * TILE_SIZE, dtype=torch.bool,
                             device=counts.device)
        padded[:camera.height, :camera.width] = pixel_mask.to(counts.device).bool()
        marked = padded.reshape(tiles.tiles_y, TILE_SIZE, tiles.tiles_x, TILE_SIZE).permute(0, 2, 1, 3).reshape(-1)
    for e in rounds:  # entries are (pair, pixel) contributions; padding pixels never contribute
        pair = e.pair if marked is None else e.pair[marked[e.pixel]]
        counts += torch.bincount(tiles.gauss_ids[pair], minlength=len(gaussians))
    return counts
