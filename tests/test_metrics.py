"""Tests for gsexp.metrics: PSNR/SSIM against closed forms, LPIPS against the official
v0.1 distances of the LPIPS authors' example triplet, and the no-download guarantee."""

import math
import os
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from gsexp import metrics

SHARED = Path(os.environ.get("GSEXP_SHARED", Path(__file__).resolve().parents[2] / "shared"))
LPIPS_REF = SHARED / "data" / "lpips_ref"
needs_shared = pytest.mark.skipif(
    not (LPIPS_REF / "ex_ref.png").is_file() or not (SHARED / "weights").is_dir(),
    reason=f"shared data/weights not found at {SHARED}",
)


def load_png(name: str) -> torch.Tensor:
    arr = np.asarray(Image.open(LPIPS_REF / name).convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(arr).permute(2, 0, 1).contiguous()


@pytest.fixture
def no_download(monkeypatch):
    """Make every download route (torch.hub, torchvision weights, raw sockets) fail loudly."""

    def refuse(*args, **kwargs):
        raise AssertionError("a download was attempted")

    import torchvision._internally_replaced_utils as tv_utils
    import torchvision.models._api as tv_api

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    monkeypatch.setattr(tv_utils, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(tv_api, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(tv_api.WeightsEnum, "get_state_dict", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    metrics._lpips_cache.clear()  # force a fresh build under the patches
    yield
    metrics._lpips_cache.clear()


# Official LPIPS v0.1 distances from the shared README; the shared weights reproduce
# them to 3 decimals, and 0.001 is the precision they are published at.
@needs_shared
@pytest.mark.parametrize(
    "net, d_p0, d_p1", [("vgg", 0.569, 0.422), ("alex", 0.722, 0.138)]
)
def test_lpips_matches_official(no_download, monkeypatch, net, d_p0, d_p1):
    monkeypatch.delenv("GSEXP_LPIPS_WEIGHTS", raising=False)
    monkeypatch.setenv("GSEXP_SHARED", str(SHARED))
    ref, p0, p1 = load_png("ex_ref.png"), load_png("ex_p0.png"), load_png("ex_p1.png")
    got0 = metrics.lpips(ref, p0, net=net).item()
    got1 = metrics.lpips(ref, p1, net=net).item()
    print(f"LPIPS {net}: (ref,p0)={got0:.4f} (ref,p1)={got1:.4f}")
    assert got0 == pytest.approx(d_p0, abs=1e-3)
    assert got1 == pytest.approx(d_p1, abs=1e-3)

    # batched input gives the mean of the pair; a repeat call reuses the cached module
    batch = metrics.lpips(torch.stack([ref, ref]), torch.stack([p0, p1]), net=net)
    assert batch.dim() == 0
    assert batch.item() == pytest.approx((got0 + got1) / 2, abs=1e-5)
    assert len(metrics._lpips_cache) == 1


def package_lpips(net: str) -> torch.nn.Module:
    """The lpips package's own LPIPS v0.1 with the shared backbone: what gsexp/lpips_net.py redoes."""
    import warnings

    import lpips as lpips_pkg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = lpips_pkg.LPIPS(net=net, pretrained=True, pnet_rand=True, verbose=False)
    state = torch.load(metrics.find_lpips_weights(net), map_location="cpu", weights_only=True)
    model.net.load_state_dict({k: state["features." + k.split(".", 1)[1]] for k in model.net.state_dict()})
    return model.eval().requires_grad_(False)


@needs_shared
@pytest.mark.parametrize("net", ["vgg", "alex"])
def test_lpips_equals_the_lpips_package(net, monkeypatch):
    """Fresh random pairs (and a 37x61 size that pools unevenly): the value per image and the
    gradient with respect to the image equal the package's to float32 rounding."""
    monkeypatch.setenv("GSEXP_SHARED", str(SHARED))
    theirs = package_lpips(net)
    gen = torch.Generator().manual_seed(11 if net == "vgg" else 12)
    for shape in [(2, 3, 64, 64), (1, 3, 37, 61)]:
        ref = torch.rand(shape, generator=gen)
        img = (ref + 0.3 * torch.randn(shape, generator=gen)).clamp(0, 1).requires_grad_()
        ours_img = img.detach().clone().requires_grad_()
        want = theirs(img, ref, normalize=True).reshape(-1)
        got = metrics._lpips_model(net, ours_img.device)(ours_img, ref)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(ours_img.grad, img.grad, rtol=1e-4, atol=1e-7)


def test_lpips_needs_neither_the_lpips_package_nor_torchvision_imported():
    """Their import pulls torch._dynamo in (over a second of every evaluation): LPIPS runs without."""
    import subprocess
    import sys

    code = ("import sys, torch; from gsexp import metrics; x = torch.rand(1, 3, 32, 32); "
            "print(round(metrics.lpips(x, x.flip(-1), net='alex').item(), 6)); "
            "print(sorted(m for m in ('lpips', 'torchvision', 'torch._dynamo') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         env={**os.environ, "GSEXP_SHARED": str(SHARED)})
    if "no ImageNet backbone" in out.stderr:
        pytest.skip(f"shared weights not found at {SHARED}")
    assert out.returncode == 0, out.stderr
    value, modules = out.stdout.strip().splitlines()
    assert float(value) > 0 and modules == "[]"


@needs_shared
def test_lpips_weights_argument_and_full_checkpoint(no_download, monkeypatch, tmp_path):
    # A torchvision-style full checkpoint (features.* plus classifier.*) is accepted too.
    monkeypatch.setenv("GSEXP_SHARED", str(tmp_path))  # hide the default location
    state = torch.load(SHARED / "weights" / "alexnet_features_imagenet.pth", weights_only=True)
    state["classifier.1.weight"] = torch.zeros(2, 2)
    full = tmp_path / "alexnet-full.pth"
    torch.save(state, full)
    ref, p1 = load_png("ex_ref.png"), load_png("ex_p1.png")
    assert metrics.lpips(ref, p1, net="alex", weights=full).item() == pytest.approx(0.138, abs=1e-3)


def test_lpips_without_weights_raises_helpful_error(no_download, monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("GSEXP_LPIPS_WEIGHTS", str(empty))
    monkeypatch.setenv("GSEXP_SHARED", str(empty))
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(empty / "hub"))
    img = torch.rand(3, 32, 32)
    with pytest.raises(FileNotFoundError) as err:
        metrics.lpips(img, img, net="vgg")
    msg = str(err.value)
    assert str(empty / "vgg16_features_imagenet.pth") in msg  # says where it looked
    assert "weights=" in msg and "GSEXP_LPIPS_WEIGHTS" in msg and "vgg16-397923af.pth" in msg


def test_lpips_unknown_net():
    img = torch.rand(3, 16, 16)
    with pytest.raises(ValueError, match="alex"):
        metrics.lpips(img, img, net="squeeze")


def test_psnr_identical_is_inf():
    img = torch.rand(3, 16, 16)
    assert metrics.psnr(img, img).item() == math.inf


def test_psnr_known_mse():
    # A constant offset of 0.1 gives MSE exactly 0.01 -> 20 dB; 1e-4 allows float32 rounding.
    ref = torch.full((2, 3, 8, 8), 0.5)
    img = ref + 0.1
    mse = ((img - ref) ** 2).mean().item()
    expected = 10 * math.log10(1.0 / mse)
    single, batch = metrics.psnr(img[0], ref[0]), metrics.psnr(img, ref)
    assert single.dim() == 0 and batch.dim() == 0
    assert single.item() == pytest.approx(expected, abs=1e-4)
    assert batch.item() == pytest.approx(expected, abs=1e-4)


def test_psnr_batch_is_mean_of_per_image():
    ref = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    img = (ref + 0.05 * torch.randn_like(ref)).clamp(0, 1)
    per_image = [metrics.psnr(img[i], ref[i]).item() for i in range(2)]
    assert metrics.psnr(img, ref).item() == pytest.approx(sum(per_image) / 2, abs=1e-4)


def test_ssim_identical_and_noisy():
    gen = torch.Generator().manual_seed(0)
    ref = torch.rand(2, 3, 32, 32, generator=gen)
    noisy = (ref + 0.1 * torch.randn(ref.shape, generator=gen)).clamp(0, 1)
    assert metrics.ssim(ref, ref).item() == pytest.approx(1.0, abs=1e-5)
    assert metrics.ssim(ref[0], ref[0]).item() == pytest.approx(1.0, abs=1e-5)
    value = metrics.ssim(noisy, ref)
    assert value.dim() == 0 and value.item() < 0.99


@pytest.mark.parametrize("shape", [(3, 800, 800), (2, 3, 37, 61), (1, 3, 11, 200)])
def test_psnr_and_ssim_equal_torchmetrics(shape):
    """The published SSIM and PSNR are torchmetrics' (data_range 1.0): fresh images, SSIM in
    float64 to 1e-12 of it and float32 to 1e-6 (the same sums in another order), with a gradient
    that agrees too (the CPU loss is this SSIM)."""
    from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

    gen = torch.Generator().manual_seed(sum(shape))
    ref = torch.rand(shape, generator=gen, dtype=torch.float64)
    img = (ref + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    img[..., :4, :] = ref[..., :4, :]  # a flat-error band: the variance clamp at 0 is hit
    batch = (lambda t: t if t.dim() == 4 else t[None])
    want_ssim = structural_similarity_index_measure(batch(img), batch(ref), data_range=1.0)
    want_psnr = peak_signal_noise_ratio(batch(img), batch(ref), data_range=1.0, dim=(1, 2, 3))
    assert metrics.ssim(img, ref).item() == pytest.approx(want_ssim.item(), abs=1e-12)
    # torchmetrics' 10 / ln 10 is a float32 constant: its PSNR is off by ~5e-8 relative
    assert metrics.psnr(img, ref).item() == pytest.approx(want_psnr.item(), rel=1e-7)
    per_image = [-10 * math.log10(m) for m in (batch(img) - batch(ref)).square().mean((1, 2, 3)).tolist()]
    assert metrics.psnr(img, ref).item() == pytest.approx(sum(per_image) / len(per_image), abs=1e-10)
    f32 = img.float(), ref.float()
    assert metrics.ssim(*f32).item() == pytest.approx(want_ssim.item(), abs=1e-6)
    assert metrics.psnr(*f32).item() == pytest.approx(want_psnr.item(), abs=1e-4)
    ours, theirs = img.clone().requires_grad_(), img.clone().requires_grad_()
    metrics.ssim(ours, ref).backward()
    structural_similarity_index_measure(batch(theirs), batch(ref), data_range=1.0).backward()
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-9, atol=1e-15)


def test_trainer_start_never_imports_torchmetrics():
    """torchmetrics' import (with torchvision and torch._dynamo behind it) took over 2 s of every
    job's start-up: the trainer and its metrics must not load it."""
    import subprocess
    import sys

    code = ("import sys, train, gsexp.train.recipe, gsexp.eval; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torchmetrics'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("fn", [metrics.psnr, metrics.ssim, metrics.lpips])
@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((3, 16, 16), (3, 16, 17)), ((1, 3, 16, 16), (2, 3, 16, 16)), ((1, 16, 16), (1, 16, 16)),
     ((16, 16), (16, 16))],
)
def test_bad_shapes_raise(fn, shape_a, shape_b):
    with pytest.raises(ValueError, match=r"shape"):
        fn(torch.rand(shape_a), torch.rand(shape_b))


def test_cc_psnr_forgives_an_affine_colour_change_and_nothing_else():
    """A render off by an exposure / white-balance change (3x3 + offset) scores cc_psnr inf-like
    where its PSNR is low; noise is not forgiven; a flat render still gets a finite fit."""
    from gsexp.metrics import cc_psnr, color_corrected, psnr

    gen = torch.Generator().manual_seed(0)
    ref = torch.rand(3, 32, 32, generator=gen) * 0.5 + 0.25
    mix = torch.tensor([[0.9, 0.05, 0.0], [0.0, 1.1, 0.05], [0.02, 0.0, 0.8]])
    shifted = (torch.einsum("ij,jhw->ihw", torch.linalg.inv(mix), ref - 0.03)).clamp(0, 1)
    assert psnr(shifted, ref).item() < 30 and cc_psnr(shifted, ref).item() > 60
    noisy = (ref + 0.05 * torch.randn(3, 32, 32, generator=gen)).clamp(0, 1)
    assert psnr(noisy, ref).item() - 0.01 <= cc_psnr(noisy, ref).item() < 30  # the identity is a fit too
    flat = color_corrected(torch.full((3, 32, 32), 0.5), ref)
    assert torch.isfinite(flat).all() and torch.allclose(flat, ref.mean((1, 2), keepdim=True).expand_as(ref), atol=1e-4)
