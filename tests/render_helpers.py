"""Test-only helpers: random scenes, independent and deliberately naive renderers, and the
parity figures of a rasterizer against the reference computing the same formula."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from gsexp.gaussians import Gaussians
from gsexp.gaussians.sh import eval_sh
from gsexp.render import render
from gsexp.render.constants import ALPHA_MAX, ALPHA_MIN, NEAR_PLANE, T_MIN, TILE_SIZE
from gsexp.render.settings import reference_of
from gsexp.scene.camera import Camera, look_at


def random_scene(seed: int, n: int = 60, width: int = 40, height: int = 32, sh_degree: int = 2):
    """Random anisotropic Gaussians around the origin and a camera looking at them."""
    gen = torch.Generator().manual_seed(seed)
    g = Gaussians(
        means=(torch.rand(n, 3, generator=gen) - 0.5) * 2.0,
        log_scales=torch.rand(n, 3, generator=gen) * 2.0 - 4.0,
        quats=torch.randn(n, 4, generator=gen),
        opacity_logits=torch.randn(n, generator=gen) * 2.0,
        sh=torch.randn(n, (sh_degree + 1) ** 2, 3, generator=gen) * 0.5,
        sh_degree=sh_degree,
    )
    angle = torch.rand(1, generator=gen).item() * 2 * math.pi
    eye = (3.0 * math.cos(angle), 3.0 * math.sin(angle), 1.0)
    focal = 0.9 * width
    cam = Camera(look_at(eye, (0, 0, 0)), focal, focal, width / 2, height / 2, width, height)
    return g, cam


def cuda_scene(seed: int, n: int, width: int, height: int, sh_degree: int):
    """random_scene with the Gaussians on the GPU (the camera stays on the host, as render() takes it)."""
    g, cam = random_scene(seed, n, width, height, sh_degree)
    return g.to("cuda"), cam


def culled_runs(g: Gaussians, cam: Camera) -> Gaussians:
    """g with runs of Gaussians moved behind the camera, so that blocks of 128 (the preprocess
    backward's) are whole culled ones ([1024, 3072)), ones with one Gaussian in eight on screen
    ([4096, 6144)) and, elsewhere, mostly visible ones with one in seven behind the camera."""
    w2c = cam.world_to_camera.to(torch.float32)
    behind = (2 * (-w2c[:3, :3].T @ w2c[:3, 3])).to(g.means.device)  # on the line through the origin, past the camera
    idx = torch.arange(len(g.means), device=g.means.device)
    away = (idx % 7 == 0) | ((idx >= 1024) & (idx < 3072)) | ((idx >= 4096) & (idx < 6144) & (idx % 8 != 0))
    return dataclasses.replace(g, means=torch.where(away[:, None], behind, g.means.detach()))


# Gradients of two runs that differ only in the order float atomics add up: on the H200
# (2026-12-04; 20,000 Gaussians at 400x300) they differ by at most 1.4e-6 in relative norm
# (quaternions; 2e-7 elsewhere), while single elements of a cancelling sum differ by 1e-4.
ATOMICS_REL = 1e-5


def rel_error(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """|ours - theirs| / |theirs| (Frobenius norms), in theirs' precision."""
    return ((ours.to(theirs.dtype) - theirs).norm() / theirs.norm().clamp_min(1e-30)).item()


def assert_equal_up_to_atomics(ours: torch.Tensor, theirs: torch.Tensor, what: str = "") -> None:
    assert ours.shape == theirs.shape, what
    if theirs.numel():
        assert rel_error(ours, theirs) <= ATOMICS_REL, (what, rel_error(ours, theirs))


def naive_render(g: Gaussians, cam: Camera, background=(0.0, 0.0, 0.0), hits=None, half_state=False):
    """INRIA's algorithm written pixel by pixel in float32 numpy, independent of gsexp.render.
    `hits` (an [N] int array) counts, per Gaussian, the pixels it contributes to.
    `half_state` rounds T and the colour to fp16 after every entry (TC-GS's accumulation)."""
    f32 = np.float32
    w2c = cam.world_to_camera.numpy().astype(f32)
    rot, trans = w2c[:3, :3], w2c[:3, 3]
    means = g.means.detach().numpy().astype(f32)
    scales = np.exp(g.log_scales.detach().numpy()).astype(f32)
    quats = g.quats.detach().numpy().astype(f32)
    opac = (1 / (1 + np.exp(-g.opacity_logits.detach().numpy()))).astype(f32)
    center = -rot.T @ trans
    dirs = means - center
    dirs = dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
    colors = eval_sh(g.sh.detach(), torch.from_numpy(dirs), g.sh_degree).numpy()
    tiles_x = (cam.width + 15) // 16
    tiles_y = (cam.height + 15) // 16
    tan_x, tan_y = cam.width / (2 * cam.fx), cam.height / (2 * cam.fy)
    splats = []
    for i in range(len(means)):
        t = rot @ means[i] + trans
        if t[2] <= 0.2:
            continue
        w, x, y, z = quats[i] / np.linalg.norm(quats[i])
        r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]], f32)
        m = r * scales[i][None, :]
        cov3 = m @ m.T
        tx = min(1.3 * tan_x, max(-1.3 * tan_x, t[0] / t[2])) * t[2]
        ty = min(1.3 * tan_y, max(-1.3 * tan_y, t[1] / t[2])) * t[2]
        jac = np.array([[cam.fx / t[2], 0, -cam.fx * tx / t[2] ** 2],
                        [0, cam.fy / t[2], -cam.fy * ty / t[2] ** 2]], f32)
        cov2 = jac @ rot @ cov3 @ rot.T @ jac.T
        a, b, c = cov2[0, 0] + f32(0.3), cov2[0, 1], cov2[1, 1] + f32(0.3)
        det = a * c - b * b
        if det <= 0:
            continue
        mid = 0.5 * (a + c)
        radius = math.ceil(3 * math.sqrt(mid + math.sqrt(max(0.1, mid * mid - det))))
        px = cam.fx * t[0] / t[2] + cam.cx - 0.5
        py = cam.fy * t[1] / t[2] + cam.cy - 0.5
        x0, x1 = min(tiles_x, max(0, int((px - radius) / 16))), min(tiles_x, max(0, int((px + radius + 15) / 16)))
        y0, y1 = min(tiles_y, max(0, int((py - radius) / 16))), min(tiles_y, max(0, int((py + radius + 15) / 16)))
        if (x1 - x0) * (y1 - y0) == 0:
            continue
        splats.append(dict(index=i, depth=t[2], xy=(px, py), conic=(c / det, -b / det, a / det), o=opac[i],
                           color=colors[i], rect=(x0, x1, y0, y1)))
    splats.sort(key=lambda s: s["depth"])  # stable: equal depths keep index order
    image = np.zeros((3, cam.height, cam.width), f32)
    final_t = np.ones((cam.height, cam.width), f32)
    for py in range(cam.height):
        for px in range(cam.width):
            tx, ty = px // 16, py // 16
            T, rgb = f32(1.0), np.zeros(3, f32)
            for s in splats:
                x0, x1, y0, y1 = s["rect"]
                if not (x0 <= tx < x1 and y0 <= ty < y1):
                    continue
                dx, dy = s["xy"][0] - px, s["xy"][1] - py
                ca, cb, cc = s["conic"]
                power = -0.5 * (ca * dx * dx + cc * dy * dy) - cb * dx * dy
                if power > 0:
                    continue
                alpha = min(0.99, s["o"] * math.exp(power))
                if alpha < 1 / 255:
                    continue
                test_t = T * (1 - alpha)
                if half_state:
                    test_t = f32(np.float16(test_t))
                if test_t < 1e-4:
                    break
                rgb += s["color"] * alpha * T
                if half_state:
                    rgb = rgb.astype(np.float16).astype(f32)
                if hits is not None:
                    hits[s["index"]] += 1
                T = test_t
            image[:, py, px] = rgb + T * np.asarray(background, f32)
            final_t[py, px] = T
    return torch.from_numpy(image), torch.from_numpy(1 - final_t)


def dense_render64(g: Gaussians, cam: Camera, background=(0.0, 0.0, 0.0), tiles: bool = True):
    """Independent differentiable renderer in float64: loops over Gaussians in depth order,
    vectorised over all pixels (culling and tile rectangles from the reference's preprocess).
    tiles=False: the exhaustive reference, every Gaussian in front of the camera against
    every pixel, with the same alpha rules and no tile culling (the loop form of
    gsexp.render.reference.exhaustive). Gaussians go in the
    rasterizers' order: by float32 depth, ties in index order (biker has such ties).

    Returns (image [3,H,W], margin [H,W]): per pixel, how close (|log ratio|) any of its
    alphas came to 1/255 and its transmittance came to 1e-4, the two thresholds where a
    rounding difference flips a decision and changes the pixel by far more than rounding."""
    from gsexp.render.reference.preprocess import preprocess

    proj = preprocess(g.map(lambda t: t.double()), cam)
    ys, xs = torch.meshgrid(torch.arange(cam.height, dtype=torch.float64),
                            torch.arange(cam.width, dtype=torch.float64), indexing="ij")
    tile_x, tile_y = (xs // 16).long(), (ys // 16).long()
    T = torch.ones(cam.height, cam.width, dtype=torch.float64)
    done = torch.zeros(cam.height, cam.width, dtype=torch.bool)
    rgb = torch.zeros(3, cam.height, cam.width, dtype=torch.float64)
    margin = torch.full((cam.height, cam.width), math.inf, dtype=torch.float64)
    if tiles:
        drawn = proj.radii > 0
    else:
        a, b, c = proj.conics.detach().unbind(-1)
        drawn = (proj.depths > NEAR_PLANE) & (a * c - b * b > 0)
    key = proj.depths.detach().float()  # the rasterizers' sort key: float32 depth, ties in Gaussian order
    for i in sorted(torch.nonzero(drawn).flatten().tolist(), key=lambda k: key[k].item()):
        inside = ~done
        if tiles:
            (x0, y0), (x1, y1) = proj.rect_min[i].tolist(), proj.rect_max[i].tolist()
            inside = inside & (tile_x >= x0) & (tile_x < x1) & (tile_y >= y0) & (tile_y < y1)
        dx, dy = proj.means2d[i, 0] - xs, proj.means2d[i, 1] - ys
        a, b, c = proj.conics[i]
        power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
        raw = proj.opacities[i] * torch.exp(power)
        alpha = torch.clamp(raw, max=0.99)
        use = inside & (power <= 0) & (alpha >= 1 / 255)
        after = T * (1 - alpha)
        with torch.no_grad():
            near = torch.minimum((raw * 255).log().abs(), torch.where(use, (after / 1e-4).log().abs(), math.inf))
            margin = torch.where(inside, torch.minimum(margin, near), margin)
        stop = use & (after < 1e-4)
        done = done | stop
        use = use & ~stop
        alpha = torch.where(use, alpha, torch.zeros_like(alpha))
        rgb = rgb + proj.colors[i][:, None, None] * (alpha * T)
        T = T * (1 - alpha)
    return rgb + T * torch.tensor(background, dtype=torch.float64)[:, None, None], margin


def stable_pixels(g: Gaussians, cam: Camera, min_margin: float = 1e-4) -> torch.Tensor:
    """[H,W] mask of pixels whose every decision is at least `min_margin` (log ratio) from
    its threshold: there, implementations that differ only by rounding must agree to
    rounding. Elsewhere a flipped decision is legitimate and changes the pixel by ~1/255."""
    with torch.no_grad():
        return dense_render64(g, cam)[1] > min_margin


PARAMS = ("means", "log_scales", "quats", "opacity_logits", "sh")


def forward_errors(g, cam, settings, background=(0.0, 0.0, 0.0)) -> dict:
    """render(settings) against render(reference_of(settings)) on the same device: max abs
    image / alpha difference, share of pixels within 1e-4, radii and n_contrib agreement."""
    with torch.no_grad():
        ref = render(g, cam, reference_of(settings), background=background)
        out = render(g, cam, settings, background=background)
    diff = torch.maximum((out.image - ref.image).abs().amax(0), (out.alpha - ref.alpha).abs())
    off = torch.nonzero(diff > 1e-4)[:, [1, 0]]  # (x, y)
    margins = decision_margins(g, cam, off[:200], settings.intersect, settings.antialiased, settings.dilation)
    visible = ref.radii > 0
    moved = out.n_contrib != ref.n_contrib
    return {
        "pixels_off": len(off),  # beyond 1e-4: each must be a flipped threshold decision
        "off_max_margin": margins.max().item() if len(margins) else 0.0,
        "image_max_abs": diff.max().item(),
        "alpha_max_abs": (out.alpha - ref.alpha).abs().max().item(),
        "pixels_within_1e-4": (diff <= 1e-4).float().mean().item(),
        "radii_equal": (out.radii == ref.radii).float().mean().item(),
        "n_contrib_equal": (~moved).float().mean().item(),
        "means2d_max_abs": (out.means2d - ref.means2d).abs()[visible].max().item() if visible.any() else 0.0,
        "visible": int(visible.sum()),
        "pixels": diff.numel(),
        "num_pairs": (int(out.num_pairs), reference_pairs(g, cam, settings)),  # (tile, Gaussian) pairs: ours, ref's
        # where the last contributor differs: (x, y, ours, the reference's), the first 5
        "n_contrib_off": [tuple(v) for v in torch.cat([torch.nonzero(moved)[:5, [1, 0]], out.n_contrib[moved][:5, None],
                                                        ref.n_contrib[moved][:5, None]], 1).tolist()],
    }


def reference_pairs(g, cam, settings) -> int:
    """How many (tile, Gaussian) pairs the reference's tile lists hold for these settings."""
    from gsexp.render.reference import preprocess, tile_lists

    with torch.no_grad():
        proj = preprocess(g.map(lambda t: t.detach()), cam, intersect=settings.intersect,
                          antialiased=settings.antialiased, dilation=settings.dilation)
        return len(tile_lists(proj, cam.width, cam.height).gauss_ids)


def gradient_errors(g, cam, settings, background=(0.0, 0.0, 0.0), seed: int = 0, explain: bool = False) -> dict:
    """Relative-norm error |g_ours - g_ref| / |g_ref| per parameter and for means2d, against
    reference_of(settings), for loss = <w, image> + <v, alpha> with random weights. Pixels
    where the two forwards disagree (a threshold decision flipped by rounding) get zero weight.
    explain: also the largest decision margin of (up to 200 of) those excluded pixels, which
    must be near 0 if each is such a flip (decision_margins)."""
    gen = torch.Generator(device=g.means.device).manual_seed(seed)
    w_img = torch.rand(3, cam.height, cam.width, generator=gen, device=g.means.device)
    w_alpha = torch.rand(cam.height, cam.width, generator=gen, device=g.means.device)
    outs = []
    for s in (reference_of(settings), settings):
        leaves = g.map(lambda t: t.detach().clone().requires_grad_())
        outs.append((render(leaves, cam, s, background=background), leaves))
    (ref, _), (ours, _) = outs
    with torch.no_grad():
        same = ((ours.image - ref.image).abs().amax(0) <= 1e-4) & (ours.n_contrib == ref.n_contrib)
    grads = []
    for out, leaves in outs:
        ((out.image * w_img * same).sum() + (out.alpha * w_alpha * same).sum()).backward()
        grads.append({**{k: getattr(leaves, k).grad for k in PARAMS}, "means2d": out.means2d.grad})
    errors = {k: rel_error(grads[1][k], ref_grad) for k, ref_grad in grads[0].items()}
    errors["excluded_pixels"] = 1.0 - same.float().mean().item()
    if explain:
        excluded = torch.nonzero(~same)[:, [1, 0]][:200]  # (x, y)
        margins = decision_margins(g, cam, excluded, settings.intersect, settings.antialiased, settings.dilation)
        errors["excluded_max_margin"] = margins.max().item() if len(margins) else 0.0
    return errors


def decision_margins(g, cam, pixels: torch.Tensor, intersect: str = "aabb", antialiased: bool = False,
                     dilation: float = 0.3) -> torch.Tensor:
    """For pixels [P, 2] (x, y): in float64, how close (|log ratio|) any alpha of the pixel's
    tile list came to 1/255 or its transmittance to 1e-4 before it stopped. A pixel whose
    fp32 renders differ by more than rounding must have a margin near 0 (a decision flipped)."""
    from gsexp.render.reference import preprocess, tile_lists

    with torch.no_grad():
        proj = preprocess(g.map(lambda t: t.detach().double()), cam, intersect=intersect, antialiased=antialiased,
                          dilation=dilation)
        tiles = tile_lists(proj, cam.width, cam.height)
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
