"""backward=exact_cull (csrc/backward.cu's CULL kernel: 8x4-pixel warps that skip the entries
whose ellipse box misses them) against backward=exact, the same sums in another order (GPU only;
skipped without one). Bound: ATOMICS_REL, as for float atomics in any order. A wrongly skipped
entry is far outside it: its own gradient goes missing and every entry in front of it in that
pixel gets T too small by (1 - alpha) >= 1/255."""
import pytest
import torch

from gsexp.render import make_settings, render
from gsexp.render.cuda import load
from render_helpers import PARAMS, assert_equal_up_to_atomics, cuda_scene

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SCENES = [  # seed, Gaussians, width, height, SH degree: sizes not multiples of 16 but one
    (0, 300, 77, 53, 3),
    (1, 500, 160, 128, 2),
    (3, 5000, 320, 240, 1),  # long tile lists: many batches per tile
]
VARIANTS = [("vanilla", {}), ("gemm_gs", {}), ("tc_gs", {}), ("tc_gs", {"intersect": "accutile"}),
            ("vanilla", {"antialiased": True})]
BACKGROUND = (0.2, 0.5, 0.9)


def edge_scene(seed: int, kind: str):
    """Gaussians where the skip test is tight (tests/test_backward_cull.py checks its float32
    mirror on the same kinds): 'faint' ones with opacity just over 1/255 (an ellipse of a pixel or
    less, where only the margins hold), 'thin' needles at any angle (one axis e^9 longer than the
    others; some fall back to no skip), 'small' ones of a pixel or two, on warp borders among them."""
    from render_helpers import edge_gaussians
    g, cam = edge_gaussians(seed, kind)
    return g.to("cuda"), cam


def gradients(g, cam, settings, seed: int = 0, **outputs):
    """Gradients of a random weighting of image and alpha (and depth when asked) per parameter,
    for means2d, and absgrad's sums when asked."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    leaves = g.map(lambda t: t.detach().clone().requires_grad_())
    out = render(leaves, cam, settings, background=BACKGROUND)
    loss = (out.image * torch.rand(out.image.shape, generator=gen, device="cuda")).sum()
    loss = loss + (out.alpha * torch.rand(out.alpha.shape, generator=gen, device="cuda")).sum()
    if outputs.get("depth"):
        loss = loss + (out.depth_accumulated * torch.rand(out.alpha.shape, generator=gen, device="cuda")).sum()
    loss.backward()
    grads = {**{k: getattr(leaves, k).grad for k in PARAMS}, "means2d": out.means2d.grad}
    if outputs.get("absgrad"):
        grads["absgrad"] = out.means2d_absgrad
    return out, grads


def assert_same_gradients(g, cam, name, switches):
    _, exact = gradients(g, cam, make_settings(name, **switches))
    out, cull = gradients(g, cam, make_settings(name, backward="exact_cull", **switches), **switches)
    assert exact["means2d"].abs().max() > 0 and (out.n_contrib > 0).float().mean() > 0.05
    for k in exact:
        assert_equal_up_to_atomics(cull[k], exact[k], k)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join([v[0], *map(str, v[1].values())]))
@pytest.mark.parametrize("scene", SCENES)
def test_exact_cull_equals_exact(scene, variant):
    assert_same_gradients(*cuda_scene(*scene), *variant)


@pytest.mark.parametrize("kind", ["faint", "thin", "small"])
@pytest.mark.parametrize("name,switches", [("vanilla", {}), ("tc_gs", {"intersect": "accutile"})])
def test_exact_cull_skips_nothing_that_contributes(kind, name, switches):
    assert_same_gradients(*edge_scene(7, kind), name, switches)


@pytest.mark.parametrize("switches", [{"absgrad": True}, {"depth": True}, {"absgrad": True, "depth": True}])
def test_exact_cull_with_absgrad_and_depth(switches):
    assert_same_gradients(*cuda_scene(*SCENES[1]), "tc_gs", {"precision": "fp32", **switches})


def test_biker_exact_cull_equals_exact(biker):
    g, make_camera = biker
    assert_same_gradients(g, make_camera(g, 480, 270), "tc_gs", {"intersect": "accutile"})


def test_forward_is_the_same_and_the_switch_picks_the_kernel():
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    g, cam = cuda_scene(*SCENES[1])
    outs, names = [], []
    for backward in ("exact", "exact_cull"):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            outs.append(gradients(g, cam, make_settings("tc_gs", backward=backward))[0])
            torch.cuda.synchronize()
        names.append({e.name for e in prof.events() if e.device_type == DeviceType.CUDA and "blend_backward" in e.name})
    for key in ("image", "alpha", "n_contrib"):
        assert torch.equal(getattr(outs[0], key), getattr(outs[1], key)), key
    culled = [{n for n in ns if "true>" in n or "Lb1EEEv" in n} for ns in names]  # CULL, the last template argument
    assert names[0] and not culled[0] and culled[1] == names[1], names


def test_probes_work_on_the_culled_kernel():
    """bench.py's exact_cull@walk and @no_atomics: the blend's share of every gradient is zero."""
    ext = load()
    g, cam = cuda_scene(*SCENES[1])
    settings = make_settings("tc_gs", backward="exact_cull")
    try:
        for probe in (1, 2):
            assert ext.set_backward_probe(probe)
            _, probed = gradients(g, cam, settings)
            assert not probed["means2d"].any() and not probed["opacity_logits"].any(), probe
    finally:
        ext.set_backward_probe(0)
    _, plain = gradients(g, cam, settings)
    assert plain["means2d"].abs().max() > 0
