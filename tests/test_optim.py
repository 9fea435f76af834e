"""fused_adam_step equals torch.optim.Adam (CPU fallback here; the CUDA kernel in the GPU
tests, skipped without one), keeps Adam's state format (surgery, checkpoints), and its
sparse mode leaves invisible rows untouched. gsexp's own Adam container steps and saves as
torch's does."""
import copy
import io

import pytest
import torch

from gsexp.gaussians import surgery
from gsexp.train.optim import Adam, fused_adam_step, zero_grads
from gsexp.train.params import make_optimizers, means_lr

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
SHAPES = {"means": (3,), "sh0": (1, 3), "shN": (15, 3), "opacity_logits": (), "log_scales": (3,), "quats": (4,)}
STEPS = 10


def make_params(n=37, seed=0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    return {k: torch.nn.Parameter(torch.randn(n, *s, generator=gen).to(device)) for k, s in SHAPES.items()}


def clone(params):
    return {k: torch.nn.Parameter(p.detach().clone()) for k, p in params.items()}


def set_grads(params, seed, skip=()):
    gen = torch.Generator().manual_seed(seed)
    for k, p in params.items():
        g = torch.randn(p.shape, generator=gen).to(p.device)
        p.grad = None if k in skip else g


def set_lr(opts, step):
    opts["means"].param_groups[0]["lr"] = means_lr(step, STEPS, 2.0)


def torch_step(opts):
    for opt in opts.values():
        opt.step()


def close(a, b, rtol=1e-6):
    """Within rtol of each value, or of the tensor's scale where a value crosses zero."""
    a, b = a.detach().cpu(), b.detach().cpu()
    torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * float(b.abs().max().clamp_min(1e-30)))


def assert_same(params_a, opts_a, params_b, opts_b, rtol=1e-6):
    for k in params_a:
        close(params_a[k], params_b[k], rtol)
        sa, sb = opts_a[k].state[params_a[k]], opts_b[k].state[params_b[k]]
        assert sa.keys() == sb.keys(), k
        if sa:
            assert sa["step"].device.type == "cpu" and sa["step"].dtype == sb["step"].dtype, k
            assert float(sa["step"]) == float(sb["step"]), k
            close(sa["exp_avg"], sb["exp_avg"], rtol)
            close(sa["exp_avg_sq"], sb["exp_avg_sq"], rtol)


def pair(n=37, device="cpu", foreach=None):
    ref = make_params(n, device=device)
    ours = clone(ref)
    ref_opts = make_optimizers(ref, extent=2.0, torch_adam=True)
    for opt in ref_opts.values():
        opt.param_groups[0]["foreach"] = foreach
    return ref, ref_opts, ours, make_optimizers(ours, extent=2.0)


# --- CPU: the torch fallback -----------------------------------------------------------------

@pytest.mark.parametrize("foreach", [None, True, False])
def test_matches_torch_adam_over_steps_with_changing_lr(foreach):
    ref, ref_opts, ours, opts = pair(foreach=foreach)
    for step in range(STEPS):
        set_lr(ref_opts, step)
        set_lr(opts, step)
        set_grads(ref, step)
        set_grads(ours, step)
        torch_step(ref_opts)
        fused_adam_step(opts)
        assert_same(ours, opts, ref, ref_opts)


def test_params_without_grad_are_skipped_as_adam_does():
    ref, ref_opts, ours, opts = pair()
    for step in range(6):
        skip = ("shN",) if step < 3 else ("quats",) if step == 4 else ()
        set_grads(ref, step, skip)
        set_grads(ours, step, skip)
        torch_step(ref_opts)
        fused_adam_step(opts)
        if step < 3:
            assert len(opts["shN"].state[ours["shN"]]) == 0  # no state until the first gradient
        assert_same(ours, opts, ref, ref_opts)
    assert float(opts["quats"].state[ours["quats"]]["step"]) == 5
    assert float(opts["shN"].state[ours["shN"]]["step"]) == 3


def test_surgery_mid_run_then_more_steps():
    ref, ref_opts, ours, opts = pair()
    for step in range(STEPS):
        if step == 4:
            for p, o in ((ref, ref_opts), (ours, opts)):
                surgery.duplicate(p, o, torch.arange(37) % 3 == 0)
        if step == 7:
            for p, o in ((ref, ref_opts), (ours, opts)):
                surgery.remove(p, o, torch.arange(len(p["means"])) % 5 == 1)
        set_grads(ref, step)
        set_grads(ours, step)
        torch_step(ref_opts)
        fused_adam_step(opts)
        assert_same(ours, opts, ref, ref_opts)
    assert len(ours["means"]) == len(ref["means"]) == 40


def restore(state_dicts, params):
    opts = make_optimizers(params, extent=2.0)
    for k, opt in opts.items():
        opt.load_state_dict(state_dicts[k])
    return opts


def test_state_dict_round_trip_then_continue_equals_uninterrupted():
    _, _, straight, straight_opts = pair()
    _, _, resumed, resumed_opts = pair()
    for step in range(STEPS):
        if step == 5:  # checkpoint: through bytes, as torch.save / torch.load
            buf = io.BytesIO()
            torch.save({"params": {k: p.detach() for k, p in resumed.items()},
                        "opts": {k: o.state_dict() for k, o in resumed_opts.items()}}, buf)
            buf.seek(0)
            ckpt = torch.load(buf)
            resumed = {k: torch.nn.Parameter(v) for k, v in ckpt["params"].items()}
            resumed_opts = restore(ckpt["opts"], resumed)
        for p, o in ((straight, straight_opts), (resumed, resumed_opts)):
            set_lr(o, step)
            set_grads(p, step)
            fused_adam_step(o)
        assert_same(resumed, resumed_opts, straight, straight_opts, rtol=0)


def test_state_is_interchangeable_with_torch_adam():
    """Steps alternate between opt.step() and the fused step; a run may switch at any time."""
    ref, ref_opts, ours, opts = pair()
    for step in range(STEPS):
        set_grads(ref, step)
        set_grads(ours, step)
        torch_step(ref_opts)
        (torch_step if step % 2 else fused_adam_step)(opts)
        assert_same(ours, opts, ref, ref_opts)


def test_own_adam_is_torch_adam_bit_for_bit_and_saves_in_its_format():
    """The trainer's container (no torch.optim.Optimizer, so no torch._dynamo import): opt.step()
    equals torch.optim.Adam exactly over changing learning rates, a surgery and a skipped group;
    a state dict saved by either loads into the other and the runs go on identically."""
    ref, ref_opts, ours, opts = pair()
    assert all(type(o) is Adam for o in opts.values()) and all(type(o) is torch.optim.Adam for o in ref_opts.values())
    for step in range(STEPS):
        if step == 4:
            for p, o in ((ref, ref_opts), (ours, opts)):
                surgery.duplicate(p, o, torch.arange(len(p["means"])) % 3 == 0)
        set_lr(ref_opts, step)
        set_lr(opts, step)
        skip = ("quats",) if step == 2 else ()
        set_grads(ref, step, skip)
        set_grads(ours, step, skip)
        torch_step(ref_opts)
        torch_step(opts)
        assert_same(ours, opts, ref, ref_opts, rtol=0)
    saved_ours = {k: o.state_dict() for k, o in opts.items()}
    saved_ref = {k: o.state_dict() for k, o in ref_opts.items()}
    for k in saved_ours:  # the same format: keys, packed indices, options
        assert saved_ours[k]["state"].keys() == saved_ref[k]["state"].keys()
        assert set(saved_ref[k]["param_groups"][0]) <= set(saved_ours[k]["param_groups"][0])
    # across: torch's dict into ours and ours into torch's, then both go on
    crossed_ours, crossed_ref = clone(ours), clone(ref)
    into_ours = make_optimizers(crossed_ours, extent=2.0)
    into_ref = make_optimizers(crossed_ref, extent=2.0, torch_adam=True)
    for k in saved_ours:
        into_ours[k].load_state_dict(saved_ref[k])
        into_ref[k].load_state_dict(saved_ours[k])
    for step in range(STEPS, STEPS + 3):
        for p, o in ((ref, ref_opts), (crossed_ours, into_ours), (crossed_ref, into_ref)):
            set_lr(o, step)
            set_grads(p, step)
            torch_step(o)
        assert_same(crossed_ours, into_ours, ref, ref_opts, rtol=0)
        assert_same(crossed_ref, into_ref, ref, ref_opts, rtol=0)


def test_own_adam_refuses_what_torch_adam_refuses():
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([])
    a = Adam([torch.nn.Parameter(torch.zeros(3))])
    with pytest.raises(ValueError, match="different number"):
        a.load_state_dict(Adam([torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2))]).state_dict())


def sparse_vs_dense(device, steps=3, n=41):
    """Dense steps, then sparse ones; visible rows must equal a dense Adam step on them."""
    _, _, ours, opts = pair(n, device=device)
    for step in range(steps):
        set_grads(ours, step)
        fused_adam_step(opts)
    gen = torch.Generator().manual_seed(1)
    for step in range(steps, steps + 3):
        visible = (torch.rand(n, generator=gen) < 0.5).to(device)
        before = {k: (p.detach().clone(), {s: v.clone() for s, v in opts[k].state[p].items()})
                  for k, p in ours.items()}
        dense = clone(ours)
        dense_opts = make_optimizers(dense, extent=2.0)
        for k, opt in dense_opts.items():
            opt.load_state_dict(copy.deepcopy(opts[k].state_dict()))
        set_grads(ours, step)
        set_grads(dense, step)
        fused_adam_step(opts, visible)
        torch_step(dense_opts)
        for k, p in ours.items():
            old_p, old_state = before[k]
            state, dense_state = opts[k].state[p], dense_opts[k].state[dense[k]]
            assert float(state["step"]) == step + 1  # the counter advances for every group
            assert torch.equal(p.detach()[~visible], old_p[~visible]), k
            for s in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(state[s][~visible], old_state[s][~visible]), (k, s)
                close(state[s][visible], dense_state[s][visible])
            close(p[visible], dense[k][visible])


def test_sparse_keeps_invisible_rows_and_steps_visible_ones():
    sparse_vs_dense("cpu")


def test_all_visible_equals_dense():
    _, _, dense, dense_opts = pair()
    _, _, sparse, sparse_opts = pair()
    for step in range(4):
        set_grads(dense, step)
        set_grads(sparse, step)
        fused_adam_step(dense_opts)
        fused_adam_step(sparse_opts, torch.ones(37, dtype=torch.bool))
        assert_same(sparse, sparse_opts, dense, dense_opts)


@pytest.mark.parametrize("option", [{"weight_decay": 1e-4}, {"amsgrad": True}, {"maximize": True}])
def test_unsupported_options_raise_before_any_counter_moves(option):
    _, _, ours, opts = pair()
    set_grads(ours, 0)
    fused_adam_step(opts)
    opts["quats"].param_groups[0].update(option)
    set_grads(ours, 1)
    with pytest.raises(ValueError, match=next(iter(option))):
        fused_adam_step(opts)
    assert all(float(o.state[ours[k]]["step"]) == 1 for k, o in opts.items())


def test_visible_mask_must_match_the_rows():
    _, _, ours, opts = pair()
    set_grads(ours, 0)
    with pytest.raises(ValueError, match="rows of the visible mask"):
        fused_adam_step(opts, torch.ones(36, dtype=torch.bool))


def test_zero_grads_sets_none():
    _, _, ours, opts = pair()
    set_grads(ours, 0)
    zero_grads(opts)
    assert all(p.grad is None for p in ours.values())


# --- GPU: the CUDA kernel --------------------------------------------------------------------

def misaligned(params):
    """Copies whose storage starts 4 bytes past a 16-byte boundary (the kernel's scalar path)."""
    out = {}
    for k, p in params.items():
        buf = torch.empty(p.numel() + 1, device=p.device)[1:]
        out[k] = torch.nn.Parameter(buf.view_as(p).copy_(p.detach()))
    return out


@needs_cuda
@pytest.mark.parametrize("n,align", [(1001, True), (100_003, True), (517, False)])
def test_cuda_kernel_matches_torch_adam(n, align):
    ref, ref_opts, ours, _ = pair(n, device="cuda")
    if not align:
        ours = misaligned(ours)
    opts = make_optimizers(ours, extent=2.0)
    for step in range(STEPS):
        skip = ("shN",) if step < 2 else ()
        set_lr(ref_opts, step)
        set_lr(opts, step)
        set_grads(ref, step, skip)
        set_grads(ours, step, skip)
        torch_step(ref_opts)
        fused_adam_step(opts)
        assert_same(ours, opts, ref, ref_opts)


@needs_cuda
@pytest.mark.parametrize("n", [41, 100_003])
def test_cuda_sparse_keeps_invisible_rows_and_steps_visible_ones(n):
    sparse_vs_dense("cuda", n=n)


@needs_cuda
def test_cuda_kernel_matches_the_cpu_fallback_sparse():
    _, _, gpu, gpu_opts = pair(5003, device="cuda")
    _, _, cpu, cpu_opts = pair(5003)
    gen = torch.Generator().manual_seed(2)
    for step in range(STEPS):
        visible = torch.rand(5003, generator=gen) < 0.3
        set_grads(gpu, step)
        set_grads(cpu, step)
        fused_adam_step(gpu_opts, visible.cuda())
        fused_adam_step(cpu_opts, visible)
        assert_same(gpu, gpu_opts, cpu, cpu_opts)


@needs_cuda
def test_cuda_step_is_one_kernel_launch():
    _, _, ours, opts = pair(20_000, device="cuda")
    set_grads(ours, 0)
    fused_adam_step(opts)  # creates the state (zeros kernels), builds the extension
    set_grads(ours, 1)
    visible = torch.rand(20_000, device="cuda") < 0.5
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fused_adam_step(opts, visible)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not kernels:
        pytest.skip("the profiler recorded no CUDA kernels here")
    assert len(kernels) == 1 and "fused_adam" in kernels[0], kernels
