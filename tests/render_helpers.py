"""Test-only helpers: random scenes and independent, deliberately naive renderers."""
from __future__ import annotations

import math

import numpy as np
import torch

from gsexp.gaussians import Gaussians
from gsexp.gaussians.sh import eval_sh
from gsexp.render.constants import NEAR_PLANE
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
    every pixel, with the same alpha rules and no tile culling. Gaussians go in the
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


def exhaustive_render64(g: Gaussians, cam: Camera, background=(0.0, 0.0, 0.0), chunk: int = 256,
                        depth_key: torch.Tensor | None = None):
    """dense_render64(tiles=False) in chunks of Gaussians, for scenes too large for a loop over
    single Gaussians (biker on a GPU): every Gaussian in front of the camera against every
    pixel in float64, in depth order, no tiles. Returns (image [3,H,W], margin [H,W]).
    depth_key: the float32 depths a rasterizer sorted by (its own rounding decides near-ties),
    default the reference's."""
    from gsexp.render.reference.preprocess import preprocess

    with torch.no_grad():
        proj = preprocess(g.map(lambda t: t.detach().double()), cam)
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
            alpha = raw.clamp(max=0.99)
            use = (power <= 0) & (alpha >= 1 / 255)
            factor = torch.where(use, 1 - alpha, torch.ones_like(alpha))
            after = T * torch.cumprod(factor, 0)      # T after each entry, if none stopped before it
            before = after / factor
            stop = use & (after < 1e-4)
            stopped = torch.cumsum(stop.long(), 0)
            live = ~done & (stopped - stop.long() == 0)  # the pixel still runs at this entry
            keep = use & live & ~stop
            near = torch.minimum((raw * 255).log().abs(), torch.where(use, (after / 1e-4).log().abs(), math.inf))
            margin = torch.minimum(margin, torch.where(live, near, math.inf).amin(0))
            rgb += proj.colors[ids].T @ torch.where(keep, alpha * before, torch.zeros_like(alpha))
            T = T * torch.where(keep, factor, torch.ones_like(factor)).prod(0)
            done = done | stop.any(0)
        bg = torch.tensor(background, dtype=torch.float64, device=dev)[:, None]
        image = (rgb + T * bg).reshape(3, cam.height, cam.width)
        return image, margin.reshape(cam.height, cam.width)
