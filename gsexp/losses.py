"""Training losses: 3DGS's photometric loss (1 - λ) L1 + λ (1 - SSIM).

``ssim`` is the SSIM of ``gsexp.metrics.ssim`` (torchmetrics: 11x11 Gaussian window, sigma 1.5,
reflect padding, mean over every pixel). On CUDA float32 images it runs as two fused kernels
(csrc/ssim.cu), with a gradient for ``img`` only (the target is data); elsewhere, or where the
extension cannot be built, it is ``gsexp.metrics.ssim`` itself.
"""
from __future__ import annotations

import torch

from gsexp import metrics

_ext = None  # the compiled extension; False once it turned out unavailable


def _extension():
    global _ext
    if _ext is None:
        from gsexp.render.cuda.build import CudaUnavailable, load

        try:
            _ext = load()
        except CudaUnavailable:
            _ext = False
    return _ext or None


class _FusedSSIM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        value, partials = _extension().ssim_forward(img, ref)
        ctx.save_for_backward(img, ref, partials)
        return value

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        img, ref, partials = ctx.saved_tensors
        grad = grad.reshape(1).to(torch.float32).contiguous()
        return _extension().ssim_backward(img, ref, partials, grad), None


def ssim(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """SSIM of [3,H,W] or [B,3,H,W] images as gsexp.metrics.ssim, a 0-dim tensor (the batch mean)."""
    batch_img, batch_ref = metrics._as_batch(img, ref)  # same shape checks as the metric
    fused = img.is_cuda and ref.is_cuda and img.dtype == ref.dtype == torch.float32
    if not fused or _extension() is None:
        return metrics.ssim(img, ref)
    # Every image has H*W pixels per channel, so the batch mean is the mean over all channels.
    h, w = img.shape[-2:]
    return _FusedSSIM.apply(batch_img.reshape(-1, h, w).contiguous(),
                            batch_ref.reshape(-1, h, w).detach().contiguous())


def photometric_loss(img: torch.Tensor, ref: torch.Tensor, ssim_lambda: float, fused: bool = True) -> torch.Tensor:
    """(1 - λ) mean |img - ref| + λ (1 - SSIM(img, ref)), 3DGS's training loss.
    fused=False: torchmetrics' SSIM on a GPU too (for ablations)."""
    l1 = (img - ref).abs().mean()
    if ssim_lambda == 0:
        return l1
    return (1 - ssim_lambda) * l1 + ssim_lambda * (1 - (ssim(img, ref) if fused else metrics.ssim(img, ref)))
