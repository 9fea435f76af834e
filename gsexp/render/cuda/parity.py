"""CUDA rasterizer vs the torch reference on the same GPU: forward error and gradient error.

Used by tests/test_cuda_rasterizer.py (asserts) and `python -m gsexp.render.cuda.check`
(prints the figures)."""
from __future__ import annotations

import torch

from gsexp.render import render

PARAMS = ("means", "log_scales", "quats", "opacity_logits", "sh")


def forward_errors(g, cam, background=(0.0, 0.0, 0.0), blend: str = "vanilla", intersect: str = "aabb") -> dict:
    """Max abs image / alpha difference, share of pixels within 1e-4, radii and n_contrib agreement."""
    with torch.no_grad():
        ref = render(g, cam, backend="torch", background=background, intersect=intersect)
        out = render(g, cam, backend="cuda", blend=blend, background=background, intersect=intersect)
    diff = (torch.maximum((out.image - ref.image).abs().amax(0), (out.alpha - ref.alpha).abs()))
    off = torch.nonzero(diff > 1e-4)[:, [1, 0]]  # (x, y)
    margins = decision_margins(g, cam, off[:200], intersect)
    return {
        "pixels_off": len(off),  # beyond 1e-4: each must be a flipped threshold decision
        "off_max_margin": margins.max().item() if len(margins) else 0.0,
        "image_max_abs": diff.max().item(),
        "alpha_max_abs": (out.alpha - ref.alpha).abs().max().item(),
        "pixels_within_1e-4": (diff <= 1e-4).float().mean().item(),
        "radii_equal": (out.radii == ref.radii).float().mean().item(),
        "n_contrib_equal": (out.n_contrib == ref.n_contrib).float().mean().item(),
        "means2d_max_abs": (out.means2d - ref.means2d).abs()[ref.radii > 0].max().item() if (ref.radii > 0).any() else 0.0,
        "visible": int((ref.radii > 0).sum()),
        "pixels": diff.numel(),
    }


def gradient_errors(g, cam, background=(0.0, 0.0, 0.0), seed: int = 0, blend: str = "vanilla",
                    intersect: str = "aabb") -> dict:
    """Relative-norm error |g_cuda - g_ref| / |g_ref| per parameter and for means2d, for
    loss = <w, image> + <v, alpha> with random weights. Pixels where the two forwards
    disagree (a threshold decision flipped by rounding: termination boundaries) get zero weight."""
    gen = torch.Generator(device=g.means.device).manual_seed(seed)
    h, w = cam.height, cam.width
    w_img = torch.rand(3, h, w, generator=gen, device=g.means.device)
    w_alpha = torch.rand(h, w, generator=gen, device=g.means.device)
    outs, grads = [], []
    for backend in ("torch", "cuda"):
        leaves = g.map(lambda t: t.detach().clone().requires_grad_())
        out = render(leaves, cam, backend=backend, blend="vanilla" if backend == "torch" else blend,
                     background=background, intersect=intersect)
        outs.append((out, leaves))
    (ref, ref_leaves), (cu, cu_leaves) = outs
    with torch.no_grad():
        same = ((cu.image - ref.image).abs().amax(0) <= 1e-4) & (cu.n_contrib == ref.n_contrib)
    for out, leaves in outs:
        loss = (out.image * w_img * same).sum() + (out.alpha * w_alpha * same).sum()
        loss.backward()
        grads.append({**{k: getattr(leaves, k).grad for k in PARAMS}, "means2d": out.means2d.grad})
    errors = {}
    for k, ref_grad in grads[0].items():
        denom = ref_grad.norm().item()
        errors[k] = (grads[1][k] - ref_grad).norm().item() / max(denom, 1e-30)
    errors["excluded_pixels"] = 1.0 - same.float().mean().item()
    return errors


def scene_camera(g, width: int, height: int, view_dir=(0.3, 0.2, 1.0)):
    """A camera framing the central 96% of the Gaussians (trained scenes have far outliers)."""
    from gsexp.scene.camera import framing_camera

    means = g.means.detach().float().cpu()
    lo, hi = torch.quantile(means, 0.02, dim=0), torch.quantile(means, 0.98, dim=0)
    core = means[((means >= lo) & (means <= hi)).all(1)]
    return framing_camera(core, width, height, view_dir=view_dir)


def decision_margins(g, cam, pixels: torch.Tensor, intersect: str = "aabb") -> torch.Tensor:
    """For pixels [P, 2] (x, y): in float64, how close (|log ratio|) any alpha of the pixel's
    tile list came to 1/255 or its transmittance to 1e-4 before it stopped. A pixel whose
    fp32 renders differ by more than rounding must have a margin near 0 (a decision flipped)."""
    from gsexp.render.constants import ALPHA_MAX, ALPHA_MIN, T_MIN, TILE_SIZE
    from gsexp.render.reference import duplicate, preprocess, sort_pairs

    with torch.no_grad():
        proj = preprocess(g.map(lambda t: t.detach().double()), cam, intersect=intersect)
        tiles = sort_pairs(proj, *duplicate(proj), cam.width, cam.height)
        margins = []
        for x, y in pixels.tolist():
            start, end = tiles.tile_ranges[(y // TILE_SIZE) * tiles.tiles_x + x // TILE_SIZE].tolist()
            ids = tiles.gauss_ids[start:end]
            dx, dy = proj.means2d[ids, 0] - x, proj.means2d[ids, 1] - y
            a, b, c = proj.conics[ids].unbind(-1)
            power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
            raw = proj.opacities[ids] * torch.exp(power)
            use = (power <= 0) & (raw.clamp(max=ALPHA_MAX) >= ALPHA_MIN)
            after = torch.cumprod(torch.where(use, 1 - raw.clamp(max=ALPHA_MAX), 1.0), 0)
            live = torch.cumsum((use & (after < T_MIN)).long(), 0) - (use & (after < T_MIN)).long() == 0
            near_alpha = torch.where(live & (power <= 0), (raw / ALPHA_MIN).log().abs(), torch.inf)
            near_t = torch.where(live & use, (after / T_MIN).log().abs(), torch.inf)
            margins.append(torch.minimum(near_alpha, near_t).min() if len(ids) else torch.tensor(torch.inf))
        return torch.stack(margins) if margins else torch.zeros(0)
