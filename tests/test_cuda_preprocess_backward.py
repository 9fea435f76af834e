"""The preprocess backward (csrc/preprocess.cu: a block's SH rows through shared memory, every
gradient written by the kernel) on a scene with culled runs, in memory that held NaNs: the
reference's gradients, and exact zeros for culled Gaussians and for bands above the degree (GPU
only; tests/test_preprocess_host.py checks the same kernels built for the CPU)."""
import pytest
import torch

from gsexp.render import make_settings, render
from gsexp.render.settings import reference_of
from render_helpers import cuda_scene, culled_runs, rel_error

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

BACKGROUND = (0.2, 0.5, 0.9)
FIELDS = ("means", "log_scales", "quats", "opacity_logits")


def leaves(g, layout: str):
    """The tensors a training step differentiates, as the kernels receive them: the split
    parameters (sh0, shN) or one joined SH array; all 16 bases stored either way."""
    from gsexp.gaussians.params import make_params, to_gaussians

    if layout == "split":
        params = make_params(g)
        return params, to_gaussians(params, g.sh_degree)
    joined = g.map(lambda t: t.detach().clone().requires_grad_())
    return {k: getattr(joined, k) for k in (*FIELDS, "sh")}, joined


@pytest.mark.parametrize("layout", ["split", "joined"])
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_backward_against_the_reference(layout, degree):
    g, cam = cuda_scene(3, 20000, 400, 300, 3)
    g = culled_runs(g, cam)  # whole culled blocks of 128, sparse ones and mostly visible ones
    weights = torch.rand(3, cam.height, cam.width, device="cuda", generator=torch.Generator("cuda").manual_seed(4))
    settings = make_settings("vanilla", intersect="accutile")
    params, gaussians = leaves(g, layout)
    out = render(gaussians, cam, settings, background=BACKGROUND, sh_degree=degree)
    ref_g = g.map(lambda t: t.detach().clone().requires_grad_())
    ref = render(ref_g, cam, reference_of(settings), background=BACKGROUND, sh_degree=degree)
    with torch.no_grad():
        same = (out.image - ref.image).abs().amax(0) <= 1e-4  # threshold flips by rounding: no weight
    visible = out.radii > 0
    assert same.float().mean() > 0.999 and 0.3 < visible.float().mean() < 0.8
    # blocks of the gradient buffer's size (csrc/ext.cpp) held NaNs: the allocator hands them back
    numel = sum(p.numel() for p in params.values()) + 8 * g.means.shape[0] + 36  # + the blend's, alignment
    blocks = [torch.full((numel,), float("nan"), device="cuda") for _ in range(4)]
    del blocks
    grads = dict(zip(params, torch.autograd.grad((out.image * weights * same).sum(), list(params.values()))))
    (ref.image * weights * same).sum().backward()

    if layout == "split":
        grads["sh"] = torch.cat([grads.pop("sh0"), grads.pop("shN")], 1)
    used = (degree + 1) ** 2
    for k, ours in grads.items():
        assert torch.isfinite(ours).all(), k
        assert not ours[~visible].any(), k  # culled rows written as zeros, not left as found
        theirs = getattr(ref_g, k).grad
        if k == "sh":
            assert not ours[:, used:].any()
            ours, theirs = ours[:, :used], theirs[:, :used]
        assert rel_error(ours, theirs) <= 1e-3, (k, rel_error(ours, theirs))


def test_gradients_start_on_16_bytes():
    """The backward's gradients are slices of one buffer, each starting on 16 bytes whatever N is,
    so the fused Adam reads them a float4 at a time (csrc/adam.cu's aligned path)."""
    from gsexp.gaussians.params import make_params, to_gaussians

    g, cam = cuda_scene(1, 1001, 200, 150, 3)  # 1001: unaligned slice offsets without the padding
    params = make_params(g)
    out = render(to_gaussians(params, 3), cam, make_settings("tc_gs"), background=BACKGROUND)
    grads = torch.autograd.grad(out.image.sum(), list(params.values()))  # as the kernels returned them
    for k, grad in zip(params, grads):
        assert grad.data_ptr() % 16 == 0, (k, grad.data_ptr() % 16)

