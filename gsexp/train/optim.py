"""One Adam step for every optimizer at once: `fused_adam_step(optimizers)` replaces
`for opt in optimizers.values(): opt.step()`.

The optimizers are containers: `Adam` below, or torch.optim.Adam (`fused_adam=false` trains
with torch's). Their param_groups (lr, betas, eps) are read and their `state` ("step" as a
float32 CPU tensor, "exp_avg", "exp_avg_sq") is read and written exactly as torch's Adam keeps
it, so strategy surgery and state_dict checkpoints work unchanged and a run may switch between
this and `opt.step()` at any step. CUDA tensors take one kernel launch (csrc/adam.cu) for up to
8 tensors; other tensors a torch implementation with the same semantics.
"""
from __future__ import annotations

import copy
import weakref
from collections import defaultdict
from dataclasses import dataclass

import torch

MAX_TENSORS = 8  # csrc/train_ops_adam.h: ADAM_MAX_TENSORS
# torch.optim.Adam's group options, so a state dict of either loads into the other
ADAM_DEFAULTS = {"weight_decay": 0.0, "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                 "differentiable": False, "fused": None, "decoupled_weight_decay": False}


class Adam:
    """A plain Adam: torch.optim.Adam's param_groups, state and state_dict format, stepped by
    fused_adam_step. Not a torch.optim.Optimizer: constructing one of those imports
    torch._dynamo, about a second of every training's start-up (issue 39). `step()` runs the
    update in torch ops (bit-identical to torch's Adam on the CPU, tests/test_optim.py), on any
    device; the trainer steps CUDA tensors with fused_adam_step's one launch instead."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8):
        groups = [params] if torch.is_tensor(params) else list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, **ADAM_DEFAULTS}
        self.param_groups = []
        for group in groups:
            tensors = [group["params"]] if torch.is_tensor(group["params"]) else list(group["params"])
            self.param_groups.append({**self.defaults, **group, "params": tensors})
        if not any(g["params"] for g in self.param_groups):
            raise ValueError("Adam got an empty parameter list")
        self.state: defaultdict = defaultdict(dict)

    def step(self) -> None:
        fused_adam_step({"adam": self}, kernel=False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads({"adam": self})

    def state_dict(self) -> dict:
        """As torch.optim.Optimizer.state_dict: tensors by their index over the groups."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": [index[id(p)] for p in group["params"]]})
        return {"state": {index[id(p)]: s for p, s in self.state.items()}, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """As torch.optim.Optimizer.load_state_dict: moments to each tensor's device and dtype,
        "step" kept on the CPU; the groups' options from the dict, the tensors this Adam's."""
        saved = copy.deepcopy(state_dict)
        groups = saved["param_groups"]
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError("loaded state dict has a different number of parameter groups or tensors "
                             f"({[len(g['params']) for g in groups]} against "
                             f"{[len(g['params']) for g in self.param_groups]})")
        tensors = dict(zip((i for g in groups for i in g["params"]),
                           (p for g in self.param_groups for p in g["params"])))
        self.state = defaultdict(dict)
        for i, entry in saved["state"].items():
            p = tensors[i]
            self.state[p] = {k: v.to(p.device, p.dtype if v.is_floating_point() else v.dtype)
                             if torch.is_tensor(v) and k != "step" else v for k, v in entry.items()}
        self.param_groups = [{**ADAM_DEFAULTS, **g, "params": own["params"]} for g, own in zip(groups, self.param_groups)]


@dataclass
class _Entry:
    param: torch.Tensor
    grad: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step_size: float   # -lr / (1 - beta1^t), as torch's foreach Adam computes it
    bias2_sqrt: float  # sqrt(1 - beta2^t)
    beta1: float
    beta2: float
    eps: float


@torch.no_grad()
def fused_adam_step(optimizers: dict, visible: torch.Tensor | None = None, kernel: bool = True) -> None:
    """Step every Adam in `optimizers` (params with grad None are skipped, as Adam does).
    kernel=False: CUDA tensors too in torch ops (Adam.step).

    visible: optional [N] bool, N the rows of every stepped tensor: sparse Adam (Taming 3DGS /
    3DGS's accelerated "sparse adam"): rows not visible keep their param and moments unchanged.
    The step counter still advances once per group, so a visible row's bias correction follows
    the global step (a row seen again after a gap is not "younger"). 3DGS's SparseGaussianAdam
    instead never advances "step" and applies no bias correction at all; ours equals dense
    torch Adam on the visible rows, and equals it exactly when every row is visible.

    A tensor's layout is checked when it first steps (and again after surgery replaced it): a
    training step is bound by the CPU, and this runs every step.
    """
    stepped = [(opt, group, p) for opt in optimizers.values() for group in opt.param_groups
               for p in group["params"] if p.grad is not None]
    new = {id(p): p for _, _, p in stepped if not _known(p)}  # first steps, or replaced by surgery
    for _, group, p in stepped:  # everything checked before any counter moves
        _check_group(group)
        if id(p) in new:
            _check_tensor(group, p)
        if visible is not None and (p.dim() == 0 or p.shape[0] != visible.shape[0]):
            raise ValueError(f"fused_adam_step: group {group.get('name', '?')!r} has shape {tuple(p.shape)}, "
                             f"not the {visible.shape[0]} rows of the visible mask")
    by_device: dict[torch.device, list[_Entry]] = {}
    for opt, group, p in stepped:
        by_device.setdefault(p.device, []).append(_entry(opt, group, p))
    for key, p in new.items():  # _entry gave them Adam state
        _CHECKED[key] = weakref.ref(p, lambda _, key=key: _CHECKED.pop(key, None))
    for device, entries in by_device.items():
        mask = None if visible is None else visible.to(device=device, dtype=torch.bool).contiguous()
        if device.type == "cuda" and kernel:
            _step_cuda(entries, mask)
        else:
            for e in entries:
                _step_torch(e, mask)


def zero_grads(optimizers: dict) -> None:
    """opt.zero_grad(set_to_none=True) for each, without its per-call overhead (profiler hooks)."""
    for opt in optimizers.values():
        for group in opt.param_groups:
            for p in group["params"]:
                p.grad = None


_CHECKED: dict[int, weakref.ref] = {}  # id -> a tensor that passed _check_tensor and has Adam state


def _known(p: torch.Tensor) -> bool:
    ref = _CHECKED.get(id(p))
    return ref is not None and ref() is p


_UNSUPPORTED = ("weight_decay", "amsgrad", "maximize", "capturable", "fused", "differentiable")


def _check_group(group: dict) -> None:
    """Every step (options may change between steps): a few dict reads, the message only on failure."""
    if any(group.get(k) for k in _UNSUPPORTED) or any(torch.is_tensor(group[k]) for k in ("lr", "eps")) \
            or any(torch.is_tensor(b) for b in group["betas"]):
        name, bad = group.get("name", "?"), [k for k in _UNSUPPORTED if group.get(k)]
        if bad:
            raise ValueError(f"fused_adam_step supports plain Adam only (weight_decay 0, no amsgrad, maximize, "
                             f"capturable, fused or differentiable); group {name!r} sets {bad}")
        raise ValueError(f"fused_adam_step needs float lr, betas and eps (group {name!r})")


def _check_tensor(group: dict, p: torch.Tensor) -> None:
    name = group.get("name", "?")
    if p.grad.is_sparse:
        raise ValueError(f"fused_adam_step: sparse gradients are not supported (group {name!r})")
    if p.is_cuda and not (p.dtype == torch.float32 and p.is_contiguous()):
        raise ValueError(f"fused_adam_step: CUDA params must be contiguous float32 (group {name!r}: {p.dtype})")


def _state(opt, p: torch.Tensor) -> dict:
    """Adam's state for p, created as Adam's lazy init does (step on the CPU: no device sync)."""
    state = opt.state[p]
    if len(state) == 0:
        scalar = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
        state["step"] = torch.tensor(0.0, dtype=scalar)
        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    if not torch.is_tensor(state["step"]):  # very old state dicts kept a number
        state["step"] = torch.tensor(float(state["step"]), dtype=torch.float32)
    if state["step"].device.type != "cpu":
        raise ValueError("fused_adam_step: Adam's step counter is on the device (capturable/fused state); "
                         "it must be the CPU tensor of a plain Adam")
    for key in ("exp_avg", "exp_avg_sq"):  # the kernel writes in place: keep a dense copy in the state
        if not state[key].is_contiguous():
            state[key] = state[key].contiguous()
    return state


def _entry(opt, group: dict, p: torch.Tensor) -> _Entry:
    """Advance p's counter; its update's scalars come from CPU values only (no device sync)."""
    state = _state(opt, p)
    state["step"] += 1
    t = state["step"].item()
    beta1, beta2 = group["betas"]
    bias1 = 1 - beta1 ** t
    bias2 = 1 - beta2 ** t
    return _Entry(p, p.grad.contiguous(), state["exp_avg"], state["exp_avg_sq"], (group["lr"] / bias1) * -1,
                  bias2 ** 0.5, beta1, beta2, group["eps"])


def _step_cuda(entries: list[_Entry], visible: torch.Tensor | None) -> None:
    from gsexp.render.cuda.build import load

    ext = load()
    for i in range(0, len(entries), MAX_TENSORS):  # one launch for up to 8 tensors (6 or 7 in training)
        batch = entries[i:i + MAX_TENSORS]
        ext.fused_adam([e.param for e in batch], [e.grad for e in batch], [e.exp_avg for e in batch],
                       [e.exp_avg_sq for e in batch], [e.step_size for e in batch], [e.bias2_sqrt for e in batch],
                       [e.beta1 for e in batch], [e.beta2 for e in batch], [e.eps for e in batch], visible)


def _step_torch(e: _Entry, visible: torch.Tensor | None) -> None:
    """The same update with torch ops; with `visible`, on the visible rows only."""
    if visible is None:
        _adam(e.param, e.grad, e.exp_avg, e.exp_avg_sq, e)
        return
    rows = visible.nonzero().squeeze(1)
    p, m, v = (t.index_select(0, rows) for t in (e.param, e.exp_avg, e.exp_avg_sq))
    _adam(p, e.grad.index_select(0, rows), m, v, e)
    for dst, src in ((e.param, p), (e.exp_avg, m), (e.exp_avg_sq, v)):
        dst.index_copy_(0, rows, src)


def _adam(p, g, m, v, e: _Entry) -> None:
    # torch's foreach Adam op by op (its CPU path runs these same per-tensor kernels)
    m.lerp_(g, 1 - e.beta1)
    v.mul_(e.beta2).addcmul_(g, g, value=1 - e.beta2)
    denom = (v.sqrt() / e.bias2_sqrt).add_(e.eps)
    p.addcdiv_(m, denom, value=e.step_size)
