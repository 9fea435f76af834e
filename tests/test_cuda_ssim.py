"""The fused SSIM (csrc/ssim.cu, through gsexp.losses.ssim) equals torchmetrics' (GPU only;
skipped without one). Value within 1e-5 of torchmetrics in float64 (and of its float32 result on
random images); gradient within 1e-4 of torchmetrics' float64 autograd gradient, relative to
the largest entry of that gradient."""
import pytest
import torch
import torch.nn.functional as F
from torchmetrics.functional.image import structural_similarity_index_measure as tm_ssim

from gsexp import losses, metrics

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

VALUE_TOL = 1e-5
GRAD_TOL = 1e-4


def reference(img, ref):
    """torchmetrics in float64: value and gradient with respect to img."""
    x = img.detach().double().requires_grad_(True)
    value = tm_ssim(x[None] if x.dim() == 3 else x, (ref[None] if ref.dim() == 3 else ref).double(), data_range=1.0)
    value.backward()
    return value.item(), x.grad


def fused(img, ref):
    x = img.detach().clone().requires_grad_(True)
    value = losses.ssim(x, ref)
    value.backward()
    return value, x.grad


def assert_matches(img, ref):
    value, grad = fused(img, ref)
    ref_value, ref_grad = reference(img, ref)
    assert value.dim() == 0 and value.is_cuda and value.dtype == torch.float32
    assert abs(value.item() - ref_value) < VALUE_TOL, (value.item(), ref_value)
    rel = ((grad.double() - ref_grad).abs().max() / ref_grad.abs().max()).item()
    assert rel < GRAD_TOL, rel
    return value


def noisy_pair(shape, noise, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    img = torch.rand(shape, generator=gen, device="cuda")
    ref = (img + noise * torch.randn(shape, generator=gen, device="cuda")).clamp(0, 1)
    return img, ref


def degraded(img, seed):
    """A 3x3 box blur plus noise: a render-like neighbour of img."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    blurred = F.avg_pool2d(img[None], 3, 1, 1, count_include_pad=False)[0]
    return (blurred + 0.02 * torch.randn(img.shape, generator=gen, device="cuda")).clamp(0, 1)


# Odd sizes put image edges at every position in a 32x16 tile; 6 is the smallest torchmetrics' pad allows.
@pytest.mark.parametrize("shape", [(3, 37, 53), (3, 6, 6), (3, 33, 70), (3, 17, 31), (3, 97, 130), (3, 800, 800)])
@pytest.mark.parametrize("noise", [0.1, None])  # None: independent images
def test_random_images(shape, noise):
    img, ref = noisy_pair(shape, noise or 0.0, seed=sum(shape))
    if noise is None:
        ref = torch.rand(shape, device="cuda")
    value = assert_matches(img, ref)
    torch.testing.assert_close(value, metrics.ssim(img, ref), rtol=0, atol=VALUE_TOL)  # today's fp32 path


def test_flat_regions():
    """Constant background with objects and a noisy target, like a synthetic scene: sigma^2
    there is far below mu^2, where fp32 moments lose most precision."""
    img = torch.ones(3, 200, 300, device="cuda")
    img[:, 40:120, 60:150] = 0.25
    img[:, 90:180, 130:260] = torch.linspace(0.0, 1.0, 130, device="cuda")
    img[1, 10:30, 10:290] = 0.0
    assert_matches(degraded(img, 1), img)
    assert_matches(img, degraded(img, 2))


@pytest.fixture
def lego_view(shared):
    """lego's first training view on the GPU (skipped where a GPU session staged only part of shared)."""
    from gsexp.scene.images import read_image

    path = shared / "data/nerf_synthetic/lego/train/r_0.png"
    if not path.is_file():
        pytest.skip(f"{path} not found (a partial shared folder)")
    return read_image(path, background=(1.0, 1.0, 1.0)).cuda()


def test_real_image(lego_view):
    img = lego_view
    assert_matches(degraded(img, 3), img)  # a render-like image against its target
    assert_matches(img, degraded(img, 4))


def test_batch_and_other_channel_counts():
    img, ref = noisy_pair((2, 3, 40, 29), 0.1, seed=5)
    assert_matches(img, ref)
    torch.testing.assert_close(losses.ssim(img, ref), metrics.ssim(img, ref), rtol=0, atol=VALUE_TOL)
    # The kernels take any channel count ([C,H,W]); torchmetrics with C channels is the reference.
    from gsexp.render.cuda.build import load

    img, ref = noisy_pair((5, 21, 40), 0.1, seed=6)
    value, partials = load().ssim_forward(img, ref)
    ref_value, ref_grad = reference(img, ref)
    assert abs(value.item() - ref_value) < VALUE_TOL
    grad = load().ssim_backward(img, ref, partials, torch.ones(1, device="cuda"))
    assert ((grad.double() - ref_grad).abs().max() / ref_grad.abs().max()).item() < GRAD_TOL


def test_deterministic_and_no_host_sync():
    img, ref = noisy_pair((3, 256, 320), 0.1, seed=7)
    first = fused(img, ref)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any host sync in forward or backward raises
    try:
        second = fused(img, ref)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def photometric_reference(img, ref, lam):
    """3DGS's loss in float64 through torch and torchmetrics: value and gradient w.r.t. img."""
    x = img.detach().double().requires_grad_(True)
    value = (1 - lam) * (x - ref.double()).abs().mean() + lam * (1 - tm_ssim(x[None], ref.double()[None], data_range=1.0))
    value.backward()
    return value.item(), x.grad


@pytest.mark.parametrize("lam", [0.2, 0.5, 1.0])
def test_photometric_loss_is_one_fused_pair(lam, lego_view):
    """The whole loss, L1 term included, from the two fused kernels: value and gradient as the
    float64 reference, ties (img == ref, where abs() has gradient 0) included, no host sync."""
    lego = lego_view
    img, ref = noisy_pair((3, 64, 80), 0.1, seed=8)
    tied = ref.clone()
    tied[:, ::2] = img[:, ::2]  # every other row equal
    for img, ref in ((img, ref), (img, tied), (degraded(lego, 5), lego)):
        random = ref is not lego
        x = img.clone().requires_grad_(True)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            loss = losses.photometric_loss(x, ref, lam)
            loss.backward()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        value, grad = photometric_reference(img, ref, lam)
        assert loss.dim() == 0 and abs(loss.item() - value) < VALUE_TOL, (loss.item(), value)
        assert ((x.grad.double() - grad).abs().max() / grad.abs().max()).item() < GRAD_TOL
        if not random:  # a float32 torch SSIM is off by ~2e-4 on lego's flat background
            continue
        # and the unfused path (torch's L1, gsexp.metrics' SSIM in float32) agrees
        y = img.clone().requires_grad_(True)
        unfused = losses.photometric_loss(y, ref, lam, fused=False)
        unfused.backward()
        torch.testing.assert_close(loss, unfused, rtol=0, atol=VALUE_TOL)
        torch.testing.assert_close(x.grad, y.grad, rtol=0, atol=GRAD_TOL * y.grad.abs().max().item())



def test_l1_term_alone_is_torchs():
    """Weights (0, 1, 0): the kernels give mean |img - ref| and abs()'s gradient, 0 at ties."""
    from gsexp.render.cuda.build import load

    img, ref = noisy_pair((3, 37, 53), 0.1, seed=9)
    ref[:, ::3] = img[:, ::3]
    value, partials = load().ssim_forward(img, ref, 0.0, 1.0, 0.0)
    grad = load().ssim_backward(img, ref, partials, torch.ones(1, device="cuda"), 0.0, 1.0)
    x = img.clone().requires_grad_(True)
    expected = (x - ref).abs().mean()
    expected.backward()
    torch.testing.assert_close(value, expected.detach(), rtol=1e-6, atol=0)
    torch.testing.assert_close(grad, x.grad, rtol=1e-6, atol=0)
    assert (grad[:, ::3] == 0).all()


def test_input_checks():
    from gsexp.render.cuda.build import load

    ext = load()
    img = torch.rand(3, 16, 16, device="cuda")
    for bad_img, bad_ref in [(img.double(), img.double()), (img.cpu(), img.cpu()), (img.transpose(1, 2), img),
                             (img, img[:, :15]), (img[:, :5], img[:, :5]), (img[None], img[None])]:
        with pytest.raises(RuntimeError):
            ext.ssim_forward(bad_img, bad_ref)
