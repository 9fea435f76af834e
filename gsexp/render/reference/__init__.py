"""Pure-PyTorch reference rasterizer: readable, differentiable, CPU or CUDA."""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from gsexp.render.reference.blend import blend
from gsexp.render.reference.formulas import make_formula
from gsexp.render.reference.preprocess import Projected, preprocess
from gsexp.render.reference.tiles import TileLists, duplicate, sort_pairs

__all__ = ["rasterize", "preprocess", "duplicate", "sort_pairs", "blend", "make_formula",
           "Projected", "TileLists"]


@contextmanager
def _timed(stage_ms: dict, name: str, device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    yield
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    stage_ms[name] = (time.perf_counter() - start) * 1e3


def rasterize(gaussians, camera, *, blend_name="vanilla", precision="fp32", g2l=True,
              early_cull=True, half_blend=False, background=None, sh_degree=None, intersect="aabb"):
    """Run the four stages; returns (image, alpha, n_contrib, projected, stage_ms, num_pairs)."""
    formula = make_formula(blend_name, precision, g2l, early_cull, half_blend)
    device = gaussians.means.device
    stage_ms: dict[str, float] = {}
    with _timed(stage_ms, "preprocess", device):
        proj = preprocess(gaussians, camera, sh_degree, intersect)
    with _timed(stage_ms, "duplicate", device):
        gauss_ids, tile_xy = duplicate(proj)
    with _timed(stage_ms, "sort", device):
        tiles = sort_pairs(proj, gauss_ids, tile_xy, camera.width, camera.height)
    with _timed(stage_ms, "blend", device):
        image, alpha, n_contrib = blend(proj, tiles, formula, camera.width, camera.height, background)
    return image, alpha, n_contrib, proj, stage_ms, len(gauss_ids)
