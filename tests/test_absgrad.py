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


def test_default_strategy_with_absgrad_accumulates_both_statistics():
    """strategy.options.absgrad: beside the plain statistic, out.means2d_absgrad accumulates into
    grad2d_abs (NDC-scaled the same way); without absgrad it stays zero."""
    from gsexp.train.strategy.default import DefaultStrategy

    g, cam = random_scene(5, 40, 20, 16, 1)
    out = render(g.map(lambda t: t.requires_grad_()), cam, absgrad=True)
    out.image.sum().backward()
    params = {"means": g.means}
    states = {}
    for absgrad in (False, True):
        strategy = DefaultStrategy(absgrad=absgrad, scene_extent=1.0)
        states[absgrad] = strategy.initial_state()
        strategy._accumulate(params, states[absgrad], out, cam.width, cam.height)
    half = torch.tensor([cam.width / 2, cam.height / 2])
    visible = out.radii > 0
    plain = torch.where(visible, (out.means2d.grad * half).norm(dim=1), 0.0)
    absolute = torch.where(visible, (out.means2d_absgrad * half).norm(dim=1), 0.0)
    for absgrad in (False, True):
        assert torch.allclose(states[absgrad]["grad2d"], plain)
    assert torch.allclose(states[True]["grad2d_abs"], absolute) and not states[False]["grad2d_abs"].any()
    assert (absolute >= plain - 1e-6).all() and (absolute > plain + 1e-6).any()
    assert DefaultStrategy(grad_threshold=2e-4).abs_threshold == pytest.approx(8e-4)
    assert DefaultStrategy(absgrad=True, absgrad_threshold=1e-3).abs_threshold == 1e-3


def test_absgrad_rules():
    """split (AbsGS's code): large Gaussians split where the absolute statistic reaches 0.0008,
    small ones clone where 3DGS's gradient reaches 0.0002; both: both by the absolute one;
    quantile (Mip-Splatting's code): 3DGS's rule, and as many again by the absolute statistic."""
    from gsexp.train.strategy.default import DefaultStrategy

    # Gaussians: (plain, absolute) mean statistics, small or not
    plain = torch.tensor([3e-4, 1e-4, 3e-4, 1e-4, 3e-4, 1e-4])
    absolute = torch.tensor([5e-4, 9e-4, 5e-4, 9e-4, 9e-4, 5e-4])
    small = torch.tensor([True, True, False, False, False, True])
    state = {"grad2d_abs": absolute * 2, "count": torch.full((6,), 2.0)}
    picks = {rule: DefaultStrategy(absgrad=True, absgrad_rule=rule).candidates(state, plain, small).tolist()
             for rule in ("split", "both", "quantile")}
    assert DefaultStrategy().candidates(state, plain, small).tolist() == [True, False, True, False, True, False]
    assert picks["split"] == [True, False, False, True, True, False]   # clones: plain; splits: absolute
    assert picks["both"] == [False, True, False, True, True, False]    # both absolute
    # 3 pass the plain rule, so the 3 largest absolute statistics join them (Gaussians 1, 3, 4)
    assert picks["quantile"] == [True, True, True, True, True, False]
    nothing = DefaultStrategy(absgrad=True, absgrad_rule="quantile").candidates(state, plain * 0, small)
    assert not nothing.any()  # none by the plain rule: none by the absolute one either
    with pytest.raises(ValueError, match="absgrad_rule must be one of split, both, quantile"):
        DefaultStrategy(absgrad_rule="all")


def test_training_with_absgrad_renders_with_the_switch(tmp_path):
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    from gsexp.config import validate
    from gsexp.train.setup import setup

    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        cfg = compose("train", overrides=["strategy.options.absgrad=true", "data.options.num_gaussians=100",
                                          "data.options.num_views=4", "data.options.width=16",
                                          "data.options.height=16", "logger=none", "device=cpu"])
    run = setup(validate(cfg), tmp_path)
    assert run.settings.absgrad and run.strategy.absgrad


def test_a_state_from_before_the_absolute_statistic_still_accumulates():
    """Checkpoints written before grad2d_abs joined the default strategy's statistics resume."""
    from gsexp.train.strategy.default import DefaultStrategy

    g, cam = random_scene(5, 40, 20, 16, 1)
    out = render(g.map(lambda t: t.requires_grad_()), cam, absgrad=True)
    out.image.sum().backward()
    strategy = DefaultStrategy(absgrad=True, scene_extent=1.0)
    state = strategy.initial_state()
    del state["grad2d_abs"]
    strategy._accumulate({"means": g.means}, state, out, cam.width, cam.height)
    assert state["grad2d_abs"].shape == (40,) and state["grad2d_abs"].any()
