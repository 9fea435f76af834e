"""rasterizer.depth on the CUDA blends (vanilla, gemm_gs, tc_gs; exact and GEMM-form backwards)
equals the torch reference (GPU only; skipped without one). Bounds as tests/test_cuda_rasterizer.py's:
the depth within 1e-4 of the reference per unit of depth (the image's 1e-4, z being a fourth
colour) on pixels whose forwards agree, gradients within 1e-3 relative norm with the pixels whose
forwards disagree (a threshold decision flipped by rounding) given zero weight. The CPU check of
dL/dz's path to the means is tests/test_preprocess_host.py; the reference's own check against a
brute-force loop and gradcheck is tests/test_render_depth.py."""
import pytest
import torch

from gsexp.render import make_settings, render
from gsexp.render.settings import reference_of
from render_helpers import PARAMS, cuda_scene, rel_error

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SCENES = [(1, 800, 130, 97, 3), (2, 5000, 320, 240, 1)]  # seed, Gaussians, width, height, SH degree
BACKGROUND = (0.2, 0.5, 0.9)
# fp32 operands: the matrix blends then compute the reference's formula to rounding
VARIANTS = [("vanilla", {}), ("vanilla", {"intersect": "accutile"}), ("gemm_gs", {"precision": "fp32"}),
            ("tc_gs", {"precision": "fp32"}), ("vanilla", {"backward": "gemm_fp32"}),
            ("tc_gs", {"precision": "fp32", "backward": "gemm_tf32"})]
COVERED = 0.1  # expected depth = sum w z / sum w enters the loss where alpha > this (its gradient ~ 1/alpha)


def leaves_of(g):
    return g.map(lambda t: t.detach().clone().requires_grad_())


def agreeing(ours, ref):
    """Pixels whose forwards agree: image within 1e-4 and the same last contributor."""
    return ((ours.image - ref.image).abs().amax(0) <= 1e-4) & (ours.n_contrib == ref.n_contrib)


@pytest.mark.parametrize("scene", SCENES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_forward_depth_matches_reference(scene, variant):
    name, switches = variant
    settings = make_settings(name, depth=True, **switches)
    g, cam = cuda_scene(*scene)
    with torch.no_grad():
        ref = render(g, cam, reference_of(settings), background=BACKGROUND)
        ours = render(g, cam, settings, background=BACKGROUND)
    same = agreeing(ours, ref)
    assert same.float().mean() > 0.999
    z = ref.depths[ref.radii > 0]
    scale = z.abs().max().item()
    acc_err = (ours.depth_accumulated - ref.depth_accumulated)[same].abs().max().item() / scale
    covered = same & (ref.alpha > COVERED)
    depth_err = (ours.depth - ref.depth)[covered].abs().max().item() / scale
    print(scene, variant, acc_err, depth_err)
    assert covered.float().mean() > 0.2  # much of the image is drawn
    assert acc_err <= 1e-4 and depth_err <= 1e-4
    assert (ours.depth[covered] >= z.min() - 1e-3).all() and (ours.depth[covered] <= z.max() + 1e-3).all()
    assert (ours.depth[ours.alpha == 0] == 0).all()
    assert ours.depth.dtype == torch.float32 and ours.depth.shape == (cam.height, cam.width)


@pytest.mark.parametrize("scene", SCENES)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("loss", ["depth", "all"])
def test_depth_gradients_match_reference(scene, variant, loss):
    """loss "depth": only <u, sum w z> + <v, expected depth>, so a dropped or misrouted depth term
    shows as a relative error near 1 (and as colour gradients where the reference has none);
    "all": with the image and alpha terms, as training would mix them."""
    name, switches = variant
    settings = make_settings(name, depth=True, **switches)
    g, cam = cuda_scene(*scene)
    gen = torch.Generator(device="cuda").manual_seed(3)
    weights = {k: torch.randn(*shape, generator=gen, device="cuda") for k, shape in (
        ("image", (3, cam.height, cam.width)), ("alpha", (cam.height, cam.width)),
        ("acc", (cam.height, cam.width)), ("depth", (cam.height, cam.width)))}
    outs = [(render(leaves, cam, s, background=BACKGROUND), leaves)
            for s in (reference_of(settings), settings) for leaves in [leaves_of(g)]]
    (ref, _), (ours, _) = outs
    with torch.no_grad():
        same = agreeing(ours, ref)
        covered = same & (ref.alpha > COVERED)
    assert same.float().mean() > 0.999
    grads = []
    for out, leaves in outs:
        total = (out.depth_accumulated * weights["acc"] * same).sum() + (out.depth * weights["depth"] * covered).sum()
        if loss == "all":
            total = total + (out.image * weights["image"] * same).sum() + (out.alpha * weights["alpha"] * same).sum()
        total.backward()
        grads.append({**{k: getattr(leaves, k).grad for k in PARAMS}, "means2d": out.means2d.grad})
    errors = {k: rel_error(grads[1][k], theirs) for k, theirs in grads[0].items()}
    print(scene, variant, loss, errors)
    for k, err in errors.items():
        assert err <= 1e-3, (k, err)
    assert grads[1]["means"].abs().max() > 0
    if loss == "depth":  # z carries no colour: the SH gradients come only through alpha
        assert grads[1]["sh"].abs().max() == 0


@pytest.mark.parametrize("variant", VARIANTS + [("tc_gs", {}), ("tc_gs", {"half_blend": True})])
def test_depth_leaves_image_and_gradients_alone(variant):
    """The image, alpha and last contributors with depth on are bit-identical to those without it;
    an image loss's gradients equal within the atomics' order, both with no gradient for the depth
    (the plain backward runs) and with a zero one (the depth kernels run, adding nothing)."""
    name, switches = variant
    plain, with_depth = make_settings(name, **switches), make_settings(name, depth=True, **switches)
    g, cam = cuda_scene(*SCENES[0])
    gen = torch.Generator(device="cuda").manual_seed(5)
    w_img = torch.randn(3, cam.height, cam.width, generator=gen, device="cuda")
    runs = []
    for settings, zero_depth_loss in ((plain, False), (with_depth, False), (with_depth, True)):
        leaves = leaves_of(g)
        out = render(leaves, cam, settings, background=BACKGROUND)
        total = (out.image * w_img).sum() + out.alpha.sum()
        if zero_depth_loss:
            total = total + 0 * out.depth_accumulated.sum()
        total.backward()
        runs.append((out, {**{k: getattr(leaves, k).grad for k in PARAMS}, "means2d": out.means2d.grad}))
    (base, base_grads), *others = runs
    assert base.depth is None and base.depth_accumulated is None
    for out, grads in others:
        for k in ("image", "alpha", "n_contrib", "radii", "means2d", "depths"):
            assert torch.equal(getattr(out, k), getattr(base, k)), k
        assert out.depth_accumulated.abs().max() > 0
        for k, theirs in base_grads.items():
            assert rel_error(grads[k], theirs) <= 1e-5, (k, rel_error(grads[k], theirs))  # ATOMICS_REL
