"""The 3DGS training recipe: one loop, read top to bottom.

data -> init -> (resume) -> for each step: render a training view, 0.8 L1 + 0.2 (1 - SSIM),
backward, densification hooks, Adam -> periodic eval / checkpoint -> final eval, PLY,
summary.json.
"""
from __future__ import annotations

import math
import random
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from gsexp import metrics
from gsexp.compress import format as compressed_format
from gsexp.compress import make_compression
from gsexp.gaussians import Gaussians, save_ply
from gsexp.render import render
from gsexp.scene import load_scene
from gsexp.train.checkpoint import latest_checkpoint, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from gsexp.train.params import make_optimizers, make_params, means_lr, to_gaussians
from gsexp.train.strategy import make_strategy


def pick_device(name: str, backend: str = "torch") -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("config key 'device': cuda requested but no CUDA device is available; use device=cpu")
    if backend == "cuda" and name != "cuda":
        raise ValueError(f"config key 'rasterizer.backend': the CUDA rasterizer needs a GPU and the run is on "
                         f"{name}; use rasterizer=torch on the CPU")
    return torch.device(name)


def load_data(cfg: DictConfig):
    d = cfg.data
    options = dict(d.options)
    if d.kind in ("blender", "transforms", "synthetic"):
        options["background"] = tuple(d.background)
    if d.kind in ("transforms", "llff", "colmap", "synthetic"):
        options["test_every"] = d.test_every
    if d.kind != "synthetic":
        options["downscale"] = d.downscale
    return load_scene(d.kind, d.path, **options)


def initial_gaussians(cfg: DictConfig, scene) -> Gaussians:
    m = cfg.model
    use_points = scene.points is not None and len(scene.points) > 0 and m.init != "random"
    if m.init == "points" and not use_points:
        raise ValueError("config key 'model.init': 'points' but the scene has no SfM points; use init=random")
    if use_points:
        return Gaussians.from_points(scene.points, scene.point_colors, sh_degree=m.sh_degree,
                                     opacity=m.init_opacity)
    radius = m.random_radius or 0.3 * scene.extent
    gen = torch.Generator().manual_seed(cfg.seed)
    # Centred on the world origin, as 3DGS does for scenes without points (Blender scenes are).
    return Gaussians.random(m.num_random, (0.0, 0.0, 0.0), radius, sh_degree=m.sh_degree,
                            opacity=m.init_opacity, generator=gen)


def seed_everything(seed: int):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def lpips_available(cfg: DictConfig) -> bool:
    if cfg.eval_lpips is False:
        return False
    try:
        metrics.find_lpips_weights(cfg.lpips_net)
        return True
    except FileNotFoundError:
        if cfg.eval_lpips is True:
            raise
        warnings.warn("LPIPS weights not found: the run reports lpips=null (eval_lpips=auto). "
                      "Set GSEXP_LPIPS_WEIGHTS or GSEXP_SHARED to enable it.")
        return False


def evaluate(cfg, g: Gaussians, scene, device, logger, step, run_dir: Path, with_lpips: bool,
             save_renders: bool, prefix: str = "eval") -> dict:
    """PSNR / SSIM / LPIPS on the test split, mean and per view; renders saved as PNG.
    Also the render latency: end to end and per stage (medians over the views, stage timing on).
    Logged under `prefix`/."""
    g = g.detach()
    bg = tuple(scene.background)
    per_view, render_ms, stages = [], [], {}
    with torch.no_grad():
        for i, (cam, ref) in enumerate(zip(scene.test_cameras, scene.test_images)):
            start = _synced_clock(device)
            out = render(g, cam, background=bg, **{**rasterizer_args(cfg), "timing": True})
            render_ms.append((_synced_clock(device) - start) * 1e3)
            for k, v in out.stage_ms.items():
                stages.setdefault(k, []).append(v)
            img = out.image.clamp(0, 1)
            ref = ref.to(device)  # metrics where the render is (LPIPS on a CPU dominates a GPU eval)
            row = {"view": cam.name or str(i), "psnr": metrics.psnr(img, ref).item(),
                   "ssim": metrics.ssim(img, ref).item(),
                   "lpips": metrics.lpips(img, ref, net=cfg.lpips_net).item() if with_lpips else None}
            per_view.append(row)
            if save_renders:
                from torchvision.utils import save_image
                save_image(img, run_dir / "renders" / f"test_{i:03d}.png")
            if i == 0:
                logger.log_image(f"{prefix}/render", img, step)
    mean = {k: (sum(r[k] for r in per_view) / len(per_view) if per_view and per_view[0][k] is not None else None)
            for k in ("psnr", "ssim", "lpips")}
    latency = {"render_ms": statistics.median(render_ms) if render_ms else None,
               "stage_ms": {k: statistics.median(v) for k, v in stages.items()}}
    logger.log({**{f"{prefix}/{k}": v for k, v in mean.items() if v is not None},
                f"{prefix}/render_ms": latency["render_ms"],
                **{f"{prefix}/stage_ms/{k}": v for k, v in latency["stage_ms"].items()}}, step)
    return {**mean, **latency, "per_view": per_view}


def _synced_clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def rasterizer_args(cfg) -> dict:
    r = cfg.rasterizer
    return dict(backend=r.backend, blend=r.blend, precision=r.precision, g2l=r.g2l, early_cull=r.early_cull,
                batch=r.batch, half_blend=r.half_blend, intersect=r.intersect, timing=r.timing)


def train(cfg: DictConfig, run_dir: Path, logger, overrides: list[str]) -> dict:
    """Train as `cfg` says, writing checkpoints, renders, point_cloud.ply into run_dir.
    Returns the summary (also written to summary.json by the caller's logger)."""
    device = pick_device(cfg.device, cfg.rasterizer.backend)
    seed_everything(cfg.seed)
    (run_dir / "renders").mkdir(parents=True, exist_ok=True)
    scene = load_data(cfg)
    with_lpips = lpips_available(cfg)
    images = [im.to(device) for im in scene.train_images]
    cameras = scene.train_cameras  # render() moves them; the CUDA backend reads them on the host

    params = {k: torch.nn.Parameter(v.to(device)) for k, v in make_params(initial_gaussians(cfg, scene)).items()}
    optimizers = make_optimizers(params, scene.extent)
    compression = make_compression(cfg.compress.name, **OmegaConf.to_container(cfg.compress.options, resolve=True)
                                   ).scaled(cfg.iterations)
    compression.setup(params, optimizers)  # e.g. the mask's own parameters
    strategy = make_strategy(cfg.strategy.name, scene_extent=scene.extent,
                             white_background=all(c >= 1.0 for c in scene.background),
                             **OmegaConf.to_container(cfg.strategy.options, resolve=True)).scaled(cfg.iterations)
    state = strategy.initial_state()
    start, order = 0, []
    checkpoint = resolve_resume(cfg.resume, run_dir)
    if checkpoint is not None:
        start, state, order = restore(checkpoint, params, optimizers, device)
    elif latest_checkpoint(run_dir) is not None:
        raise ValueError(f"{run_dir} already holds checkpoints of an earlier run; pass resume=auto to "
                         "continue it, or choose another run directory (hydra.run.dir=...)")

    started = time.perf_counter()
    bar = tqdm(range(start, cfg.iterations), initial=start, total=cfg.iterations, dynamic_ncols=True,
               disable=None)
    for step in bar:
        step_start = time.perf_counter()
        if not order:  # a fresh random pass over the training views
            order = torch.randperm(len(images)).tolist()
        view = order.pop()
        sh_degree = min(step // cfg.sh_degree_interval, cfg.model.sh_degree) if cfg.sh_degree_interval \
            else cfg.model.sh_degree
        for group in optimizers["means"].param_groups:
            group["lr"] = means_lr(step, cfg.iterations, scene.extent)
        # A random background (as 3DGS's option) regularises: targets keep the scene's own.
        bg = torch.rand(3).tolist() if cfg.random_background else tuple(scene.background)
        target = images[view]

        out = render(compression.gaussians(params, cfg.model.sh_degree), cameras[view], background=bg,
                     sh_degree=sh_degree, **rasterizer_args(cfg))
        l1 = (out.image - target).abs().mean()
        ssim = metrics.ssim(out.image, target)
        loss = (1 - cfg.ssim_lambda) * l1 + cfg.ssim_lambda * (1 - ssim) + strategy.regularization(params) \
            + compression.regularization(params)
        strategy.step_pre_backward(params, optimizers, state, step, out)
        loss.backward()
        strategy.step_post_backward(params, optimizers, state, step, out, cameras[view].width,
                                    cameras[view].height, lr=optimizers["means"].param_groups[0]["lr"])
        compression.post_backward(params, state)
        for opt in optimizers.values():
            opt.step()
            opt.zero_grad(set_to_none=True)
        compression.step(params, optimizers, state, step, scene.train_cameras)

        if step % max(cfg.log_every, 1) == 0 or step == cfg.iterations - 1:
            with torch.no_grad():
                train_psnr = -10 * math.log10(max(((out.image - target) ** 2).mean().item(), 1e-12))
            n = len(params["means"])
            logger.log({"train/loss": loss.item(), "train/psnr": train_psnr, "train/num_gaussians": n,
                        "train/step_seconds": time.perf_counter() - step_start,
                        "train/peak_memory_mb": peak_memory_mb(device),
                        **{f"train/stage_ms/{k}": v for k, v in out.stage_ms.items()}}, step)
            bar.set_postfix(loss=f"{loss.item():.4f}", psnr=f"{train_psnr:.2f}", G=n)
        done = step + 1
        if cfg.eval_every and done % cfg.eval_every == 0 and done < cfg.iterations:
            evaluate(cfg, compression.gaussians(params, cfg.model.sh_degree), scene, device, logger, done, run_dir,
                     with_lpips, False)
        if cfg.checkpoint_every and done % cfg.checkpoint_every == 0 and done < cfg.iterations:
            save_checkpoint(run_dir, done, payload(cfg, params, optimizers, state, done, order))
    bar.close()
    train_seconds = time.perf_counter() - started

    save_checkpoint(run_dir, cfg.iterations, payload(cfg, params, optimizers, state, cfg.iterations, order))
    arrays = compression.finalize(params, scene.train_cameras, cfg.model.sh_degree, state)
    uncompressed = None
    if arrays is not None:  # evaluate and export what the compressed file holds
        # ... and what training ended with, so that a study can split pruning's loss from the VQ's
        before = evaluate(cfg, compression.gaussians(params, cfg.model.sh_degree), scene, device, logger,
                          cfg.iterations, run_dir, with_lpips, False, prefix="eval_uncompressed")
        uncompressed = {k: before[k] for k in ("psnr", "ssim", "lpips")}
        size_mb = compressed_format.save(run_dir / "compressed.npz", arrays)
        params = {k: v.to(device) for k, v in make_params(compressed_format.decode(arrays)).items()}
    result = evaluate(cfg, compression.gaussians(params, cfg.model.sh_degree), scene, device, logger,
                      cfg.iterations, run_dir, with_lpips, True)
    ply = run_dir / "point_cloud.ply"
    save_ply(to_gaussians({k: v.detach().cpu() for k, v in params.items()}, cfg.model.sh_degree), ply)
    if arrays is None:
        size_mb = ply.stat().st_size / 2**20
    return {"psnr": result["psnr"], "ssim": result["ssim"], "lpips": result["lpips"],
            "per_view": result["per_view"], "num_gaussians": len(params["means"]),
            "iterations": cfg.iterations, "train_seconds": train_seconds,
            "size_mb": size_mb, "render_ms": result["render_ms"],
            "stage_ms": result["stage_ms"], "uncompressed": uncompressed, "overrides": list(overrides),
            "status": "ok"}


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def payload(cfg, params, optimizers, state, step: int, order: list[int]) -> dict:
    """Everything a resumed run needs to continue exactly: the views left in this pass too."""
    return {"step": step, "order": torch.tensor(order, dtype=torch.long),
            "params": {k: v.detach().cpu() for k, v in params.items()},
            "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
            "strategy": state, "rng": rng_state(), "config": OmegaConf.to_container(cfg, resolve=True)}


def resolve_resume(resume, run_dir: Path):
    if resume in (None, "", "null"):
        return None
    if resume == "auto":
        return latest_checkpoint(run_dir)  # none yet: start fresh
    path = Path(resume)
    if not path.is_file():
        raise FileNotFoundError(f"config key 'resume': checkpoint {path} not found; use resume=auto or a .pt path")
    return path


def restore(path: Path, params, optimizers, device):
    ckpt = load_checkpoint(path)
    for name, value in ckpt["params"].items():
        params[name] = torch.nn.Parameter(value.to(device))
        optimizers[name].param_groups[0]["params"] = [params[name]]
        optimizers[name].state.clear()
        optimizers[name].load_state_dict(ckpt["optimizers"][name])
    set_rng_state(ckpt["rng"])
    state = {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in ckpt["strategy"].items()}
    return ckpt["step"], state, ckpt["order"].tolist()
