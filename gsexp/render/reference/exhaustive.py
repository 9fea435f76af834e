"""The exhaustive reference: every Gaussian in front of the camera against every pixel, in
float64, no tiles, the rasterizers' alpha and termination rules. What the tile intersect
modes must reproduce (a tight mode drops only entries that cannot contribute); used by
tests/test_intersect.py, tests/test_cuda_intersect.py and experiments/tight_intersection."""
from __future__ import annotations

import math

import torch

from gsexp.render.constants import ALPHA_MAX, ALPHA_MIN, NEAR_PLANE, T_MIN
from gsexp.render.reference.preprocess import preprocess


def exhaustive_render64(g, cam, background=(0.0, 0.0, 0.0), chunk: int = 256,
                        depth_key: torch.Tensor | None = None, antialiased: bool = False):
    """Chunks of Gaussians against every pixel, for scenes too large for a loop over single
    Gaussians (biker on a GPU). Returns (image [3,H,W], margin [H,W]): per pixel, how close
    (|log ratio|) any of its alphas came to 1/255 and its transmittance to 1e-4, where a
    rounding difference flips a decision. depth_key: the float32 depths a rasterizer sorted
    by (its own rounding decides near-ties), default the reference's. antialiased: the
    compensated opacity (rasterizer.antialiased)."""
    with torch.no_grad():
        proj = preprocess(g.map(lambda t: t.detach().double()), cam, antialiased=antialiased)
        a, b, c = proj.conics.unbind(-1)
        drawn = torch.nonzero((proj.depths > NEAR_PLANE) & (a * c - b * b > 0)).flatten()
        key = proj.depths.float() if depth_key is None else depth_key.to(proj.depths.device).float()
        order = drawn[torch.sort(key[drawn], stable=True).indices]  # the rasterizers' key, ties by index
        dev = proj.means2d.device
        ys, xs = torch.meshgrid(torch.arange(cam.height, dtype=torch.float64, device=dev),
                                torch.arange(cam.width, dtype=torch.float64, device=dev), indexing="ij")
        xs, ys = xs.reshape(-1), ys.reshape(-1)
        T = torch.ones_like(xs)
        done = torch.zeros_like(xs, dtype=torch.bool)
        rgb = torch.zeros(3, len(xs), dtype=torch.float64, device=dev)
        margin = torch.full_like(xs, math.inf)
        for start in range(0, len(order), chunk):
            ids = order[start:start + chunk]
            dx, dy = proj.means2d[ids, 0, None] - xs, proj.means2d[ids, 1, None] - ys
            power = -0.5 * (a[ids, None] * dx * dx + c[ids, None] * dy * dy) - b[ids, None] * dx * dy
            raw = proj.opacities[ids, None] * torch.exp(power)
            alpha = raw.clamp(max=ALPHA_MAX)
            use = (power <= 0) & (alpha >= ALPHA_MIN)
            factor = torch.where(use, 1 - alpha, torch.ones_like(alpha))
            after = T * torch.cumprod(factor, 0)      # T after each entry, if none stopped before it
            before = after / factor
            stop = use & (after < T_MIN)
            stopped = torch.cumsum(stop.long(), 0)
            live = ~done & (stopped - stop.long() == 0)  # the pixel still runs at this entry
            keep = use & live & ~stop
            near = torch.minimum((raw / ALPHA_MIN).log().abs(),
                                 torch.where(use, (after / T_MIN).log().abs(), math.inf))
            margin = torch.minimum(margin, torch.where(live, near, math.inf).amin(0))
            rgb += proj.colors[ids].T @ torch.where(keep, alpha * before, torch.zeros_like(alpha))
            T = T * torch.where(keep, factor, torch.ones_like(factor)).prod(0)
            done = done | stop.any(0)
        bg = torch.tensor(background, dtype=torch.float64, device=dev)[:, None]
        image = (rgb + T * bg).reshape(3, cam.height, cam.width)
        return image, margin.reshape(cam.height, cam.width)
