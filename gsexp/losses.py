"""Training losses: 3DGS's photometric loss (1 - λ) L1 + λ (1 - SSIM).

``ssim`` is the SSIM of ``gsexp.metrics.ssim`` (torchmetrics': 11x11 Gaussian window, sigma 1.5,
reflect padding, mean over every pixel). On CUDA float32 images it, and the whole photometric
loss with it, runs as two fused kernels (csrc/ssim.cu), with a gradient for ``img`` only (the
target is data); elsewhere, or where the extension cannot be built, it is ``gsexp.metrics.ssim``
itself.
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


class _FusedLoss(torch.autograd.Function):
    """weights (w_ssim, w_l1, w_constant): the value is w_ssim * SSIM + w_l1 * mean |img - ref| + w_constant."""

    @staticmethod
    def forward(ctx, img: torch.Tensor, ref: torch.Tensor, weights: tuple) -> torch.Tensor:
        value, partials = _extension().ssim_forward(img, ref, *weights)
        ctx.save_for_backward(img, ref, partials)
        ctx.weights = weights
        return value

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        img, ref, partials = ctx.saved_tensors
        grad = grad.reshape(1).to(torch.float32).contiguous()
        return _extension().ssim_backward(img, ref, partials, grad, *ctx.weights[:2]), None, None


def _fused(img: torch.Tensor, ref: torch.Tensor, weights: tuple) -> torch.Tensor | None:
    """The fused kernels' value for [3,H,W] or [B,3,H,W] images, or None where they do not apply."""
    batch_img, batch_ref = metrics._as_batch(img, ref)  # same shape checks as the metric
    if not (img.is_cuda and ref.is_cuda and img.dtype == ref.dtype == torch.float32) or _extension() is None:
        return None
    # Every image has H*W pixels per channel, so the batch mean is the mean over all channels.
    h, w = img.shape[-2:]
    return _FusedLoss.apply(batch_img.reshape(-1, h, w).contiguous(), batch_ref.reshape(-1, h, w).detach().contiguous(),
                            weights)


def ssim(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """SSIM of [3,H,W] or [B,3,H,W] images as gsexp.metrics.ssim, a 0-dim tensor (the batch mean)."""
    value = _fused(img, ref, (1.0, 0.0, 0.0))
    return metrics.ssim(img, ref) if value is None else value


def photometric_loss(img: torch.Tensor, ref: torch.Tensor, ssim_lambda: float, fused: bool = True) -> torch.Tensor:
    """(1 - λ) mean |img - ref| + λ (1 - SSIM(img, ref)), 3DGS's training loss: on CUDA one
    kernel each way (the target gets no gradient). fused=False: torch's L1 and gsexp.metrics'
    SSIM on a GPU too (for ablations)."""
    if ssim_lambda == 0:
        return (img - ref).abs().mean()
    if fused:
        value = _fused(img, ref, (-ssim_lambda, 1 - ssim_lambda, ssim_lambda))
        if value is not None:
            return value
    return (1 - ssim_lambda) * (img - ref).abs().mean() + ssim_lambda * (1 - metrics.ssim(img, ref))
