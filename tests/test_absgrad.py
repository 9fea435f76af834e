"""rasterizer.absgrad (AbsGS, gsplat's absgrad=True) on the torch reference: after backward,
out.means2d_absgrad holds per Gaussian and axis the sum over pixels of |dL_pixel / d means2d|,
against a brute-force loop that differentiates each pixel's loss on its own, in float64."""
import pytest
import torch

from gsexp.errors import InvalidCombination
from gsexp.render import make_settings, render
from render_helpers import random_scene


@pytest.mark.parametrize("switches", [{}, {"blend": "tcgs", "intersect": "accutile"}])
def test_absgrad_equals_the_per_pixel_sums(switches):
    g, cam = random_scene(5, 40, 20, 16, 1)
    g = g.map(lambda t: t.double().requires_grad_())
    gen = torch.Generator().manual_seed(9)
    w_img = torch.randn(3, cam.height, cam.width, generator=gen, dtype=torch.float64)
    w_alpha = torch.randn(cam.height, cam.width, generator=gen, dtype=torch.float64)
    def pixel_loss(out):  # [H,W]
        return (out.image * w_img).sum(0) + out.alpha * w_alpha

    brute_out = render(g, cam, **switches)  # a graph of its own: its backwards touch nothing below
    brute = torch.zeros_like(brute_out.means2d)
    for loss in pixel_loss(brute_out).flatten():
        (grad,) = torch.autograd.grad(loss, brute_out.means2d, retain_graph=True)
        brute += grad.abs()
    assert brute.abs().sum() > 0

    out = render(g, cam, absgrad=True, **switches)
    assert not out.means2d_absgrad.any()  # nothing before the backward
    pixel_loss(out).sum().backward()
    ours = out.means2d_absgrad
    # float64 both: the same terms summed in another order
    assert torch.allclose(ours, brute, rtol=1e-10, atol=1e-12)
    # it is not |grad|: pixels pulling a Gaussian different ways cancel in the gradient only
    assert (ours >= out.means2d.grad.abs() - 1e-12).all()
    assert (ours > out.means2d.grad.abs() + 1e-6).any()


def test_absgrad_is_off_by_default_and_leaves_the_gradients_alone():
    g, cam = random_scene(3)
    grads = []
    for absgrad in (False, True):
        leaves = g.map(lambda t: t.detach().clone().requires_grad_())
        out = render(leaves, cam, absgrad=absgrad)
        (out.image.sum() + out.alpha.sum()).backward()
        grads.append([out.means2d.grad] + [t.grad for t in leaves.tensors().values()])
        assert (out.means2d_absgrad is None) == (not absgrad)
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_absgrad_needs_the_exact_backward():
    with pytest.raises(InvalidCombination, match="absgrad needs backward=exact"):
        make_settings("torch", absgrad=True, blend="gemm", backward="gemm_fp32")
    for name in ("vanilla", "gemm_gs", "tc_gs"):
        assert make_settings(name, absgrad=True).absgrad
        with pytest.raises(InvalidCombination, match="absgrad needs backward=exact"):
            make_settings(name, absgrad=True, backward="gemm_tf32")
