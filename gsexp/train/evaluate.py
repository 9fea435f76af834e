"""Evaluation on the test split: quality per view and mean, renders, render latency."""
from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path

import torch
from omegaconf import DictConfig

from gsexp import metrics
from gsexp.comparison import BackgroundWriter, save_comparison, save_png
from gsexp.gaussians import Gaussians
from gsexp.render import render
from gsexp.train.progress import Progress


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


def synced_clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def evaluate(g: Gaussians, scene, settings, device, logger, step: int, *, lpips_net: str | None,
             renders_dir: Path | None = None, prefix: str = "eval", train_seconds: float | None = None) -> dict:
    """PSNR / SSIM / LPIPS (when lpips_net) on the test split, mean and per view; into renders_dir
    each render as test_<i>.png and ground truth | render | error as test_<i>_compare.png
    (gsexp/comparison.py). Also the render latency: end to end and per stage (medians over
    the views, stage timing on). Logged under `prefix`/, with train_seconds (the training clock
    at `step`) when given: quality against training time, as fast trainers plot it."""
    g = g.detach()
    bg = tuple(scene.background)
    settings = settings.replace(timing=True)
    per_view, render_ms, stages = [], [], {}
    # Lines as training's ("eval view 12/25 ..."): a large test split takes minutes after 100 %
    progress = Progress(len(scene.test_cameras), what="eval view", unit="view")
    with torch.no_grad(), progress, BackgroundWriter() as writer:
        for i, (cam, ref) in enumerate(zip(scene.test_cameras, scene.test_images)):
            start = synced_clock(device)
            out = render(g, cam, settings, background=bg)
            render_ms.append((synced_clock(device) - start) * 1e3)
            for k, v in out.stage_ms.items():
                stages.setdefault(k, []).append(v)
            img = out.image.clamp(0, 1)
            ref_host, ref = ref, ref.to(device)  # metrics where the render is (LPIPS on a CPU dominates a GPU eval)
            per_view.append({"view": cam.name or str(i), "psnr": metrics.psnr(img, ref).item(),
                             "cc_psnr": metrics.cc_psnr(img, ref).item(),
                             "ssim": metrics.ssim(img, ref).item(),
                             "lpips": metrics.lpips(img, ref, net=lpips_net).item() if lpips_net else None,
                             "render_ms": render_ms[-1]})  # the spread over views: the dashboard's error bars
            if renders_dir is not None:
                img_host = img.cpu()
                writer.submit(save_png, renders_dir / f"test_{i:03d}.png", img_host)
                writer.submit(save_comparison, renders_dir / f"test_{i:03d}_compare.png", ref_host.cpu(), img_host)
            if i == 0:
                logger.log_image(f"{prefix}/render", img, step)
            progress.update(i + 1)
    mean = {k: (sum(r[k] for r in per_view) / len(per_view) if per_view and per_view[0][k] is not None else None)
            for k in ("psnr", "cc_psnr", "ssim", "lpips")}
    latency = {"render_ms": statistics.median(render_ms) if render_ms else None,
               "stage_ms": {k: statistics.median(v) for k, v in stages.items()}}
    logger.log({**{f"{prefix}/{k}": v for k, v in mean.items() if v is not None},
                f"{prefix}/render_ms": latency["render_ms"],
                **({f"{prefix}/train_seconds": train_seconds} if train_seconds is not None else {}),
                **{f"{prefix}/stage_ms/{k}": v for k, v in latency["stage_ms"].items()}}, step)
    return {**mean, **latency, "per_view": per_view}


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
