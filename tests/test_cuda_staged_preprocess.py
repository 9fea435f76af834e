"""The staged preprocess kernels (SH rows through shared memory, ext.set_staged_preprocess) give
the unstaged kernels' images and gradients, and write every gradient themselves: culled
Gaussians and bands above the degree read exactly zero in reused, NaN-filled memory (GPU only)."""
from contextlib import contextmanager

import pytest
import torch

from gsexp.render import make_settings, render
from render_helpers import cuda_scene, culled_runs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

BACKGROUND = (0.2, 0.5, 0.9)
FIELDS = ("means", "log_scales", "quats", "opacity_logits")


@contextmanager
def staged(on: bool):
    from gsexp.render.cuda.build import load, staged_preprocess_env

    load().set_staged_preprocess(on)
    try:
        yield
    finally:  # back to what the run was started with
        load().set_staged_preprocess(staged_preprocess_env())


def mixed_scene():
    """20,000 Gaussians (SH degree 3 stored) in runs that steer the staged forward's choice per
    block of 128 (render_helpers.culled_runs)."""
    g, cam = cuda_scene(3, 20000, 400, 300, 3)
    return culled_runs(g, cam), cam


def leaves(g, layout: str):
    """The tensors a training step differentiates, as the kernels receive them: the split
    parameters (sh0, shN) or one joined SH array; all 16 bases stored either way."""
    from gsexp.gaussians.params import make_params, to_gaussians

    if layout == "split":
        params = make_params(g)
        return params, to_gaussians(params, g.sh_degree)
    joined = g.map(lambda t: t.detach().clone().requires_grad_())
    return {k: getattr(joined, k) for k in (*FIELDS, "sh")}, joined


def step(g, cam, degree, layout, weights, poison=False):
    params, gaussians = leaves(g, layout)
    settings = make_settings("tc_gs", intersect="accutile")
    out = render(gaussians, cam, settings, background=BACKGROUND, sh_degree=degree)
    loss = (out.image * weights).sum()
    if poison:  # blocks of the gradient buffer's size (csrc/ext.cpp) held NaNs: the allocator reuses them
        # + means2d, conic and colours per Gaussian, and the slices' alignment
        numel = sum(p.numel() for p in params.values()) + 8 * g.means.shape[0] + 36
        blocks = [torch.full((numel,), float("nan"), device="cuda") for _ in range(4)]
        del blocks
    grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
    return out, grads


@pytest.mark.parametrize("layout", ["split", "joined"])
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_staged_equals_unstaged(layout, degree):
    g, cam = mixed_scene()
    weights = torch.rand(3, cam.height, cam.width, device="cuda", generator=torch.Generator("cuda").manual_seed(4))
    plain_out, plain = step(g, cam, degree, layout, weights)
    with staged(True):
        out, grads = step(g, cam, degree, layout, weights, poison=True)
    visible = out.radii > 0
    assert 0.3 < visible.float().mean() < 0.8  # both kinds of block and both paths are exercised
    # the same arithmetic in the same order: the forward is bit for bit the unstaged one
    assert torch.equal(out.radii, plain_out.radii) and torch.equal(out.image, plain_out.image)
    for k, ours in grads.items():
        theirs = plain[k]
        assert torch.isfinite(ours).all(), k
        assert not ours[~visible].any(), k  # culled rows written as zeros, not left as found
        # equal up to the blend's float atomics, whose order differs between runs
        assert torch.allclose(ours, theirs, rtol=1e-4, atol=1e-7 * theirs.abs().max().item()), k
    sh = torch.cat([grads["sh0"], grads["shN"]], 1) if layout == "split" else grads["sh"]
    used = (degree + 1) ** 2
    assert not sh[:, used:].any() and sh[visible, :used].abs().sum() > 0


@pytest.mark.parametrize("on", [False, True])
def test_gradients_start_on_16_bytes(on):
    """The backward's gradients are slices of one buffer, each starting on 16 bytes whatever N is,
    so the fused Adam reads them a float4 at a time (csrc/adam.cu's aligned path)."""
    from gsexp.gaussians.params import make_params, to_gaussians

    g, cam = cuda_scene(1, 1001, 200, 150, 3)  # 1001: unaligned slice offsets without the padding
    params = make_params(g)
    with staged(on):
        out = render(to_gaussians(params, 3), cam, make_settings("tc_gs"), background=BACKGROUND)
        grads = torch.autograd.grad(out.image.sum(), list(params.values()))  # as the kernels returned them
    for k, grad in zip(params, grads):
        assert grad.data_ptr() % 16 == 0, (k, grad.data_ptr() % 16)
