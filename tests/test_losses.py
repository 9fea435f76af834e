"""gsexp.losses on the CPU: SSIM is gsexp.metrics.ssim (torchmetrics' definition) itself, with a gradient."""
import pytest
import torch

from gsexp import losses, metrics


def images(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    img = torch.rand(*shape, generator=gen)
    ref = (img + 0.1 * torch.randn(*shape, generator=gen)).clamp(0, 1)
    return img, ref


@pytest.mark.parametrize("shape", [(3, 37, 53), (2, 3, 20, 17)])
def test_ssim_on_cpu_is_the_metric(shape):
    img, ref = images(*shape)
    img.requires_grad_(True)
    value = losses.ssim(img, ref)
    assert value.dim() == 0
    assert torch.equal(value, metrics.ssim(img, ref))
    value.backward()
    assert img.grad is not None and img.grad.shape == img.shape
    assert torch.isfinite(img.grad).all() and img.grad.abs().max() > 0


def test_photometric_loss_is_l1_plus_dssim():
    img, ref = images(3, 24, 31)
    img.requires_grad_(True)
    loss = losses.photometric_loss(img, ref, 0.2)
    expected = 0.8 * (img - ref).abs().mean() + 0.2 * (1 - metrics.ssim(img, ref))
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-7)
    loss.backward()
    assert img.grad is not None and torch.isfinite(img.grad).all()
    assert torch.equal(losses.photometric_loss(img, ref, 0.0), (img - ref).abs().mean())


def test_ssim_rejects_bad_shapes():
    with pytest.raises(ValueError):
        losses.ssim(torch.rand(3, 8, 8), torch.rand(3, 8, 9))
    with pytest.raises(ValueError):
        losses.ssim(torch.rand(4, 8, 8), torch.rand(4, 8, 8))
