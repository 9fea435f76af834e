"""Peer rasterizers, timed in the same process as ours: gsplat, called as its users call it.

`gsplat`: gsplat.rasterization() with its defaults (on main, v1.6.0, that includes AccuTile's
tight tile sets; packed=True). `gsplat_higs`: main's experimental inference renderer
(gsplat.experimental.render.GaussianInferenceRenderer: fp16 output, 8x8 tiles, no gradients),
the scene packed once before timing as its users pack it. The installed version, and the commit
when the environment names it (GSPLAT_COMMIT, set by experiments/peers/stage.sh), are recorded.
"""
from __future__ import annotations

import os

import torch

from gsexp.bench.rasterizers import Rasterizer
from gsexp.render import background_tensor
from gsexp.render.constants import NEAR_PLANE


def gsplat_matrices(camera, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(viewmats [1,4,4], Ks [1,3,3]) of a gsexp Camera. Same cx, cy: gsplat's pixel centres
    sit at +0.5, as in gsexp's Camera."""
    k = torch.tensor([[camera.fx, 0.0, camera.cx], [0.0, camera.fy, camera.cy], [0.0, 0.0, 1.0]], device=device)
    return camera.world_to_camera.to(device)[None], k[None]


def gsplat_render(g, camera, background=(0.0, 0.0, 0.0), *, sh_degree: int | None = None, matrices=None,
                  **options):
    """gsplat.rasterization of gsexp Gaussians -> (image [3,H,W], alpha [H,W], meta).
    Activations (exp, sigmoid) happen inside the call, as render() does them. `matrices`:
    gsplat_matrices(camera) made once; `options` go to gsplat (packed=False keeps means2d [1,N,2])."""
    import gsplat

    viewmat, k = matrices if matrices is not None else gsplat_matrices(camera, g.device)
    degree = g.sh_degree if sh_degree is None else min(sh_degree, g.sh_degree)
    colors, alphas, meta = gsplat.rasterization(
        g.means, g.quats, g.scales, g.opacities, g.sh, viewmat, k, camera.width, camera.height,
        near_plane=NEAR_PLANE, sh_degree=degree, **options)
    image, alpha = colors[0].permute(2, 0, 1), alphas[0, ..., 0]
    if any(float(v) != 0.0 for v in background):  # composited here: 1.5.3's backgrounds= rejects [1, 3]
        image = image + (1 - alpha) * background_tensor(background, g.device)[:, None, None]
    return image, alpha, meta


def gsplat_identity() -> dict:
    import gsplat
    return {"version": gsplat.__version__, "commit": os.environ.get("GSPLAT_COMMIT", "unknown")}


def gsplat_rasterizer(g, background, sh_degree: int | None = None) -> Rasterizer:
    import gsplat

    cache = {}  # per camera: the matrices a caller of gsplat keeps on the GPU

    def run(camera, timing):
        if id(camera) not in cache:
            cache[id(camera)] = gsplat_matrices(camera, g.device)
        image, _, _ = gsplat_render(g, camera, background, sh_degree=sh_degree, matrices=cache[id(camera)])
        return image, {}

    settings = {"variant": "gsplat", "backend": "gsplat", **gsplat_identity()}
    settings |= {} if sh_degree is None else {"sh_degree": sh_degree}
    return Rasterizer(f"gsplat {gsplat.__version__}", run, settings, has_stages=False)


def gsplat_higs_rasterizer(g, background, sh_degree: int | None = None) -> Rasterizer:
    """gsplat main's inference renderer; ImportError on a gsplat without it (1.5.3)."""
    import gsplat
    from gsplat.experimental.render import GaussianInferenceRenderer
    from gsplat.scene import GaussianInferenceScene

    with torch.no_grad():
        scene = GaussianInferenceScene.from_gaussian_tensors(
            g.means.contiguous(), torch.nn.functional.normalize(g.quats, dim=-1).contiguous(),
            g.scales.contiguous(), g.opacities.contiguous(), g.sh.contiguous(), g.sh_degree, "none", id="bench")
    renderer = GaussianInferenceRenderer(scene)
    bg = background_tensor(background, g.device).float().contiguous()
    degree = g.sh_degree if sh_degree is None else min(sh_degree, g.sh_degree)
    cache = {}

    def run(camera, timing):
        if id(camera) not in cache:
            viewmat, k = gsplat_matrices(camera, g.device)
            cache[id(camera)] = (viewmat[0].contiguous(), k[0].contiguous())
        viewmat, k = cache[id(camera)]
        with torch.no_grad():
            frame = renderer.render(viewmat=viewmat, K=k, width=camera.width, height=camera.height,
                                    near_plane=NEAR_PLANE, background=bg, sh_degree=degree).frame
        return frame[0, ..., :3].permute(2, 0, 1).float(), {}

    settings = {"variant": "gsplat_higs", "backend": "gsplat", "precision": "fp16", "tile_size": 8,
                **gsplat_identity()} | ({} if sh_degree is None else {"sh_degree": sh_degree})
    return Rasterizer(f"gsplat {gsplat.__version__} HiGS", run, settings, has_stages=False)
