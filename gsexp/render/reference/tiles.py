"""Stages 2 and 3: one key per (Gaussian, tile) pair, sorted by tile then depth."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsexp.render.reference.preprocess import Projected, tiles_along


@dataclass
class TileLists:
    gauss_ids: torch.Tensor    # [M] Gaussian index of each pair, sorted by (tile, depth)
    tile_ids: torch.Tensor     # [M] tile index (ty * tiles_x + tx) of each pair
    tile_ranges: torch.Tensor  # [T, 2] start/end of each tile's run in the sorted lists
    tiles_x: int
    tiles_y: int


def duplicate(proj: Projected) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One pair per tile each Gaussian touches: (gauss_ids [M], tile (x, y) [M,2]).

    Pairs come in Gaussian order, each rectangle row by row, as the CUDA kernel emits them
    (accutile: the pairs preprocess found).
    """
    if proj.pairs is not None:
        return proj.pairs
    span = proj.rect_max - proj.rect_min
    counts = span.prod(-1) * (proj.radii > 0)
    gauss_ids = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
    first = torch.cumsum(counts, 0) - counts
    local = torch.arange(len(gauss_ids), device=counts.device) - first[gauss_ids]
    width = span[gauss_ids, 0]
    tile_xy = proj.rect_min[gauss_ids] + torch.stack([local % width, local // width], -1)
    return gauss_ids, tile_xy


def sort_pairs(proj: Projected, gauss_ids, tile_xy, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort by key = tile id << 32 | float bits of depth, as the CUDA kernels build it
    (positive floats order like their bit patterns). Returns (gauss_ids, tile_ids), sorted."""
    tiles_x = tiles_along(width)
    tile_ids = tile_xy[:, 1] * tiles_x + tile_xy[:, 0]
    depth_bits = proj.depths.detach().float()[gauss_ids].view(torch.int32).long()
    keys = (tile_ids << 32) | depth_bits
    order = torch.sort(keys, stable=True).indices  # stable: ties keep Gaussian order, like radix sort
    return gauss_ids[order], tile_ids[order]


def tile_ranges(gauss_ids, tile_ids, width: int, height: int) -> TileLists:
    """Each tile's run [start, end) in the sorted pairs."""
    tiles_x, tiles_y = tiles_along(width), tiles_along(height)
    counts = torch.bincount(tile_ids, minlength=tiles_x * tiles_y)
    ends = torch.cumsum(counts, 0)
    return TileLists(gauss_ids, tile_ids, torch.stack([ends - counts, ends], -1), tiles_x, tiles_y)


def tile_lists(proj: Projected, width: int, height: int) -> TileLists:
    """Duplicate, sort and ranges in one call."""
    return tile_ranges(*sort_pairs(proj, *duplicate(proj), width), width, height)
