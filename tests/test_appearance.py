"""appearance=affine and appearance=bilateral_grid (issue 41): a colour transform (or a grid of
them over x, y and luma) per training photo, identity at the start, learning a photo's colour
change, held back (affine) or smoothed (the grid's total variation) by its regularisation."""
import json

import pytest
import torch
import torch.nn.functional as F

from gsexp.train.appearance import LUMA, AffineAppearance, BilateralGridAppearance, make_appearance, transform
from test_train_run import TINY, run_train


def fit(reg: float, steps: int = 600):
    gen = torch.Generator().manual_seed(0)
    render = torch.rand(3, 16, 16, generator=gen)
    photos = [render, 1.2 * render + 0.05]  # photo 1: brighter, an offset
    app = AffineAppearance(2, "cpu", lr=0.01, reg=reg)
    for i in range(steps):
        view = i % 2
        loss = (app.apply(render, view) - photos[view]).abs().mean() + app.regularization(view)
        loss.backward()
        app.step()
    return app


def test_identity_at_the_start():
    app = AffineAppearance(3, "cpu")
    image = torch.rand(3, 8, 8)
    assert torch.equal(app.apply(image, 2), image) and app.regularization(2).item() == 0


def test_learns_a_photos_colour_change_and_reg_holds_it_back():
    free = fit(reg=0.0).delta.detach()
    assert torch.allclose(free[1, :, :3], 0.2 * torch.eye(3), atol=0.02)  # M = 1.2 I
    assert torch.allclose(free[1, :, 3], torch.full((3,), 0.05), atol=0.02)
    assert free[0].abs().max() < 0.02  # the photo that matches the render stays at identity
    held = fit(reg=10.0).delta.detach()
    assert held[1].square().sum() < 0.1 * free[1].square().sum()


def test_state_round_trips():
    app = fit(reg=0.0, steps=20)
    other = AffineAppearance(2, "cpu", lr=0.01)
    other.load_state_dict(app.state_dict())
    assert torch.equal(other.delta, app.delta)
    assert other.summary()["appearance_mean_change"] == pytest.approx(app.summary()["appearance_mean_change"])


def test_the_grid_is_identity_at_the_start():
    app = BilateralGridAppearance(3, "cpu")
    image = torch.rand(3, 12, 20)
    assert torch.equal(app.apply(image, 2), image)
    assert app.regularization(2).item() == 0 and app.summary()["appearance_mean_change"] == 0


def test_the_grid_axes_are_x_y_and_luma():
    """A red offset in one face of the grid moves the pixels along that face, not the far half."""
    image = torch.rand(3, 24, 32)
    right, left = (slice(None), -1), (slice(None), slice(None, 16))
    top, bottom = (0, slice(None)), (slice(12, None), slice(None))
    for face, edge, far in [((slice(None), slice(None), -1), right, left), ((slice(None), 0), top, bottom)]:
        app = BilateralGridAppearance(1, "cpu")
        with torch.no_grad():
            app.delta[0, 3][face] = 1.0  # row 0's offset: the red channel, [luma, y, x] cells
        moved = (app.apply(image, 0) - image).detach()
        assert moved[1:].abs().max() < 1e-6 and moved[0][edge].min() > 0.5 and moved[0][far].abs().max() < 1e-6
    app = BilateralGridAppearance(1, "cpu")
    with torch.no_grad():
        app.delta[0, 3, -1] = 1.0  # the brightest luma bin only
    dark, bright = torch.full((3, 4, 4), 0.05), torch.full((3, 4, 4), 0.95)
    assert (app.apply(dark, 0) - dark)[0].max() < 1e-6 and (app.apply(bright, 0) - bright)[0].min() > 0.5


def test_total_variation_is_zero_at_the_start_and_smooths_the_grid():
    app = BilateralGridAppearance(2, "cpu", lr=0.02, reg=10.0, grid_x=8, grid_y=8, grid_luma=4)  # small: fast
    assert app.regularization(1).item() == 0
    with torch.no_grad():  # a constant change plus noise: smoothing should keep the one, lose the other
        app.delta[1] = 0.3 + 0.1 * torch.randn(app.delta[1].shape, generator=torch.Generator().manual_seed(0))
    start = app.regularization(1).item()
    assert start > 0
    for _ in range(60):
        app.regularization(1).backward()
        app.step()
    assert app.regularization(1).item() < 0.05 * start
    grid = app.delta[1].detach()
    assert abs(grid.mean().item() - 0.3) < 0.02 and grid.std() < 0.02
    assert app.delta[0].abs().max() == 0  # another photo's grid is not its business


def spatial_fit_error(app, steps=150):
    """Fit `app` (photo 0) to a render whose photo is darker on its left half, as a vignette or
    a shadowed capture would be: mean squared error after `steps` of the training loss."""
    gen = torch.Generator().manual_seed(0)
    render = torch.rand(3, 24, 24, generator=gen)
    photo = torch.where(torch.arange(24) < 12, 0.6 * render, render)
    for _ in range(steps):
        ((app.apply(render, 0) - photo).abs().mean() + app.regularization(0)).backward()
        app.step()
    with torch.no_grad():
        return (app.apply(render, 0) - photo).square().mean().item()


def test_the_grid_learns_a_change_across_the_photo_that_affine_cannot():
    affine = spatial_fit_error(AffineAppearance(1, "cpu", lr=0.02, reg=0.0))
    grid = spatial_fit_error(BilateralGridAppearance(1, "cpu", lr=0.02))  # the default TV weight
    assert affine > 0.015  # one colour transform for the photo cannot darken only its left half
    assert grid < 0.05 * affine  # (a grid blind to x only halves the affine error)


def test_the_grid_state_round_trips():
    app = BilateralGridAppearance(2, "cpu", lr=0.02)
    spatial_fit_error(app, steps=5)
    other = BilateralGridAppearance(2, "cpu", lr=0.02)
    other.load_state_dict(app.state_dict())
    assert torch.equal(other.delta, app.delta)
    assert other.summary()["appearance_mean_change"] == app.summary()["appearance_mean_change"] > 0
    image = torch.rand(3, 8, 8)
    assert torch.equal(other.apply(image, 0), app.apply(image, 0))


def test_an_unknown_appearance_names_its_key():
    from omegaconf import OmegaConf

    with pytest.raises(ValueError, match="appearance.name"):
        make_appearance(OmegaConf.create({"appearance": {"name": "grid", "lr": 1e-3, "reg": 0}}), 2, "cpu")


def test_train_py_trains_with_the_grid(tmp_path):
    run_train([*TINY, "iterations=4", "eval_every=0", "checkpoint_every=4", "appearance=bilateral_grid"], tmp_path)
    (summary,) = [json.loads(p.read_text()) for p in tmp_path.rglob("summary.json")]
    assert summary["status"] == "ok" and summary["appearance_mean_change"] > 0
    ckpt = torch.load(next(tmp_path.rglob("step_000004.pt")), weights_only=True)
    assert ckpt["appearance"]["delta"].shape[1:] == (12, 8, 16, 16)


@pytest.mark.parametrize("h, w, gx, gy, gz", [(13, 21, 16, 16, 8), (40, 30, 5, 7, 3), (9, 9, 1, 4, 1)])
def test_the_grids_gradients_are_grid_samples(h, w, gx, gy, gz):
    """The slice's backward (the grid's gradient as two GEMMs, no atomics) gives what autograd
    through grid_sample gives, for the grid and the image, in float64; luma past 0 and 1 included."""
    torch.manual_seed(gx + gz)
    app = BilateralGridAppearance(2, "cpu", grid_x=gx, grid_y=gy, grid_luma=gz)
    app.delta.data = torch.randn(app.delta.shape, dtype=torch.float64) * 0.3
    image = (torch.rand(3, h, w, dtype=torch.float64) * 1.4 - 0.2).requires_grad_()
    out = app.apply(image, 1)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (app.delta, image), grad)
    y, x = torch.meshgrid((torch.arange(h, dtype=torch.float64) + 0.5) / h,
                          (torch.arange(w, dtype=torch.float64) + 0.5) / w, indexing="ij")
    luma = torch.einsum("c,chw->hw", torch.tensor(LUMA, dtype=torch.float64), image).clamp(0, 1)
    at = torch.stack((x * 2 - 1, y * 2 - 1, luma * 2 - 1), -1)
    d = F.grid_sample(app.delta[1][None], at[None, None], mode="bilinear", padding_mode="border", align_corners=True)
    ref = transform(image, d.view(3, 4, h, w))
    theirs = torch.autograd.grad(ref, (app.delta, image), grad)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert theirs[0][1].abs().sum() > 0 and theirs[0][0].abs().sum() == 0  # only photo 1's grid moves


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("h, w, gx, gy, gz", [(13, 21, 16, 16, 8), (40, 30, 5, 7, 3), (9, 9, 1, 4, 1),
                                             (720, 1280, 16, 16, 8), (37, 1000, 16, 3, 8)])
def test_the_grids_cuda_kernels_match_the_torch_path(h, w, gx, gy, gz):
    """csrc/bilateral.cu (float32, the grid's gradient summed per warp) against apply()'s torch
    ops in float64 on the GPU: the output, and the image's and the grid's gradients; luma past 0
    and 1 included, pixels of a warp on both sides of a cell boundary (1000 wide on 16 cells)."""
    from gsexp.train.appearance import _SliceCuda

    torch.manual_seed(h + gx)
    app = BilateralGridAppearance(1, "cuda", grid_x=gx, grid_y=gy, grid_luma=gz)
    grid64 = (torch.randn(app.delta.shape[1:], dtype=torch.float64, device="cuda") * 0.3).requires_grad_()
    image64 = (torch.rand(3, h, w, dtype=torch.float64, device="cuda") * 1.4 - 0.2).requires_grad_()
    ref = app.sliced(image64, grid64)
    grad = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, (image64, grid64), grad)
    image, grid = (t.detach().float().requires_grad_() for t in (image64, grid64))
    out = _SliceCuda.apply(image, grid)
    grads = torch.autograd.grad(out, (image, grid), grad.float())
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), ref.detach(), rtol=0, atol=1e-5)
    for name, got, want in zip(("image", "grid"), grads, ref_grads):
        scale = want.abs().max().item()
        torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-5 * max(scale, 1.0), msg=name)
    assert ref_grads[1].abs().sum() > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", [(12, 8, 16, 16), (12, 3, 7, 5), (12, 1, 4, 1)])
def test_the_total_variation_kernel_matches_the_torch_path(shape):
    """The grid's regulariser on CUDA (value and gradient in one launch) against total_variation
    in float64, one-cell axes included."""
    from gsexp.train.appearance import _TotalVariationCuda, total_variation

    torch.manual_seed(shape[1])
    grid64 = torch.randn(shape, dtype=torch.float64, device="cuda").requires_grad_()
    want = total_variation(grid64)
    (want_grad,) = torch.autograd.grad(want * 3.0, grid64)
    grid = grid64.detach().float().requires_grad_()
    got = _TotalVariationCuda.apply(grid)
    (got_grad,) = torch.autograd.grad(got * 3.0, grid)
    torch.testing.assert_close(got.double(), want.detach(), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(got_grad.double(), want_grad, rtol=1e-4, atol=1e-6)
