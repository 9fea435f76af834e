"""Where gsplat main (1.6.0, 90d7b4b3) and 1.5.3 differ for the training peer, decided by what the
installed gsplat has (not by its version string): the SSIM loss, the strategy's post-backward
call, and the GaussianScene bookkeeping; plus the fused-SSIM check and the versions record."""
from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import os
import platform
import subprocess
import weakref
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F


def optional_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:  # fused_ssim also raises it when its compiled extension is missing
        return None


def make_loss(ssim_lambda: float, losses=None, fused=None):
    """simple_trainer's loss, torch.lerp(L1, 1 - SSIM, λ) (st:955-961), and a name for its SSIM.

    losses: gsplat.losses (main), whose ssim_loss calls fused_ssim when it can (CUDA tensors) and
    else falls back to a torch SSIM. Without it (1.5.3): fused_ssim called directly with padding
    "valid", as 1.5.3's own trainer does (st-1.5.3:684). Neither: gsexp.metrics.ssim, torchmetrics'
    SSIM in torch ops (slow; only with --allow-slow-ssim). `fused.fused_ssim` is looked up at each
    call, so count_fused_calls sees it."""
    if losses is not None and hasattr(losses, "ssim_loss"):
        def loss(colors, pixels):
            ssim = losses.ssim_loss(colors.permute(0, 3, 1, 2), pixels.permute(0, 3, 1, 2))
            return torch.lerp(losses.l1_loss(colors, pixels).mean(), ssim, ssim_lambda)
        return loss, "gsplat.losses.ssim_loss"
    if fused is not None:
        def loss(colors, pixels):
            ssim = 1.0 - fused.fused_ssim(colors.permute(0, 3, 1, 2), pixels.permute(0, 3, 1, 2), padding="valid")
            return torch.lerp(F.l1_loss(colors, pixels), ssim, ssim_lambda)
        return loss, "fused_ssim.fused_ssim (called as 1.5.3's simple_trainer does)"
    from gsexp.metrics import ssim as slow_ssim

    def loss(colors, pixels):
        ssim = 1.0 - slow_ssim(colors.permute(0, 3, 1, 2), pixels.permute(0, 3, 1, 2))
        return torch.lerp(F.l1_loss(colors, pixels), ssim, ssim_lambda)
    return loss, "torch SSIM (gsexp.metrics.ssim, torchmetrics' definition): no fused_ssim"


@contextmanager
def count_fused_calls(fused):
    """Counts calls of fused_ssim.fused_ssim inside the block (gsplat.losses.ssim_loss imports it
    from the module at each call, so the wrapper is what it gets)."""
    calls = [0]
    if fused is None:
        yield calls
        return
    original = fused.fused_ssim

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)
    fused.fused_ssim = counted
    try:
        yield calls
    finally:
        fused.fused_ssim = original


def slow_ssim_reasons(fused_importable: bool, device: str, calls: int | None, loss_calls: int) -> list[str]:
    """Why the loss would not run fused_ssim's CUDA kernel, empty when it does. calls: fused_ssim
    calls seen over `loss_calls` loss evaluations (None: not measured yet)."""
    reasons = []
    if not fused_importable:
        reasons.append("fused_ssim is not importable (install fused-ssim, commit 0ac916a, built for this CUDA)")
    if torch.device(device).type != "cuda":
        reasons.append(f"the images are on {device}, and fused_ssim's kernel needs CUDA tensors")
    if fused_importable and calls is not None and calls < loss_calls:
        reasons.append(f"the loss called fused_ssim {calls} times in {loss_calls} warm-up steps "
                       "(gsplat's ssim_loss fell back to its torch SSIM)")
    return reasons


class PostBackward:
    """strategy.step_post_backward as simple_trainer calls it: packed=False, and on gsplat main
    the GaussianScene over the splats (st:501, st:1156-1165), which keeps its per-Gaussian
    bookkeeping in step with densification. One scene per splats dict (the warm-up's copy has
    its own)."""

    def __init__(self, strategy):
        self.strategy = strategy
        takes_scene = "scene" in inspect.signature(strategy.step_post_backward).parameters
        scene_module = optional_module("gsplat.scene") if takes_scene else None
        self.scene_class = getattr(scene_module, "GaussianScene", None)
        self.scenes = weakref.WeakKeyDictionary()

    def attach(self, splats):
        if self.scene_class is not None and splats not in self.scenes:
            self.scenes[splats] = self.scene_class.from_splats(splats, id="scene")

    def __call__(self, params, optimizers, state, step, info):
        kwargs = {}
        if self.scene_class is not None:
            self.attach(params)
            kwargs["scene"] = self.scenes[params]
        self.strategy.step_post_backward(params, optimizers, state, step, info, packed=False, **kwargs)


def package_version(module, *dist_names) -> str | None:
    if module is None:
        return None
    for name in dist_names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return getattr(module, "__version__", "unknown")


def git_commit(path: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions(gsplat, fused, device: str, repo: Path) -> dict:
    """Versions of everything that sets the peer's speed; commits from the staging's environment."""
    cuda = torch.device(device).type == "cuda"
    return {"gsplat": gsplat.__version__, "gsplat_commit": os.environ.get("GSPLAT_COMMIT", "unknown"),
            "gsplat_file": getattr(gsplat, "__file__", None),
            "fused_ssim": package_version(fused, "fused_ssim", "fused-ssim"),
            "fused_ssim_commit": os.environ.get("FUSED_SSIM_COMMIT", "unknown"),
            "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name() if cuda else None, "python": platform.python_version(),
            "gsexp_commit": git_commit(repo)}
