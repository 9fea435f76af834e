"""Issue 20's timing study: the blend backward, exact against the tensor-core GEMM form.

    python experiments/tensor_core_backward/bench.py --lego <trained lego .ply | checkpoint | run dir>
        [--biker PLY] [--sizes 800x800,1920x1080,3840x2160] [--rasterizers tc_gs:intersect=accutile]
        [--modes exact,gemm_fp32,gemm_tf32] [--views 4] [--rounds 10] [--warmup 5] [--out results.json]

Per scene, size and rasterizer: one forward per mode and orbit view, with grad enabled, then the
backward alone, again and again (retain_graph), against a fixed upstream gradient (an L1 loss
against a fixed random target, alpha unused: what training feeds it). Round r runs every mode
once, the order rotated by r, so a drift of the clocks spreads over all modes. Per mode:
- kernel ms: the blend-backward kernels' GPU time (names containing "blend_backward") per
  backward, from torch.profiler, one profiled pass per round and mode;
- backward ms: the whole backward (blend + preprocess backward) between CUDA events, unprofiled.
Medians over rounds x views; ratios are exact / mode. Once per case each GEMM mode's gradients
are compared with exact's (max |difference| per tensor as a share of its max |value|).
A mode may name a probe, MODE@walk or MODE@no_atomics (e.g. exact@walk,gemm_tf32@no_atomics):
the same kernel with a part left out (csrc/kernels.h BackwardProbe, set through the extension's set_backward_probe), so that time
differences say what the warp sums, the staging and mma, and the atomics cost where ncu cannot
read counters. Probe modes have no error check (their gradients are wrong by design).
A scene whose file is missing is skipped with a note. Needs a CUDA GPU."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # this checkout's gsexp, whatever is installed

from gsexp.bench.cameras import orbit_cameras, parse_up  # noqa: E402
from gsexp.bench.models import load_gaussians  # noqa: E402
from gsexp.bench.rasterizers import parse_rasterizer  # noqa: E402
from gsexp.bench.timing import timed  # noqa: E402
from gsexp.paths import shared_dir  # noqa: E402
from gsexp.render import render  # noqa: E402

SCENE_UP = {"lego": "z", "biker": "-y"}  # Blender scenes are z-up; INRIA/COLMAP PLYs -y
NAMES = ("means", "log_scales", "quats", "opacity_logits", "sh", "means2d")
PROBES = {"walk": 2, "no_atomics": 1}  # csrc/kernels.h BackwardProbe


def split_mode(mode: str) -> tuple[str, str]:
    """'gemm_tf32@walk' -> ('gemm_tf32', 'walk'); a plain mode has probe ''."""
    base, _, probe = mode.partition("@")
    return base, probe


@contextmanager
def probing(probe: str):
    """The extension's backward with `probe` left out ('' leaves nothing out), set back after."""
    if not probe:
        yield
        return
    from gsexp.render.cuda import load
    ext = load()
    if not ext.set_backward_probe(PROBES[probe]):  # every launch uses it until set back
        sys.exit(f"bench.py: the extension refused probe {probe!r}: rebuild it (csrc/kernels.h BackwardProbe)")
    try:
        yield
    finally:
        ext.set_backward_probe(0)


def checked(modes) -> list:
    """The modes whose gradients are compared with exact's: not probes, not exact itself."""
    return [m for m in modes[1:] if not split_mode(m)[1]]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python experiments/tensor_core_backward/bench.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lego", type=Path, help="trained lego: a .ply, a trainer checkpoint or a run directory")
    p.add_argument("--biker", type=Path, help="default <shared>/data/scenes/biker.compressed.ply")
    p.add_argument("--sizes", default="800x800,1920x1080,3840x2160")
    p.add_argument("--rasterizers", default="tc_gs:intersect=accutile",
                   help="bench specs, comma list (python -m gsexp.bench), e.g. vanilla,tc_gs:intersect=accutile")
    p.add_argument("--modes", default="exact,gemm_fp32,gemm_tf32")
    p.add_argument("--views", type=int, default=4, help="orbit views per case")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--warmup", type=int, default=5, help="untimed backwards per mode and view")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "h200_results.json")
    a = p.parse_args(argv)
    try:
        a.sizes = [tuple(int(v) for v in s.split("x")) for s in a.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes: expected WxH[,WxH...], got {a.sizes!r}")
    a.modes = a.modes.split(",")
    if a.modes[0] != "exact":
        p.error("--modes: the first must be exact (the ratios and error checks are against it)")
    bad = [m for m in a.modes if split_mode(m)[1] not in ("", *PROBES)]
    if bad:
        p.error(f"--modes: {bad[0]!r}: a probe must be one of {', '.join(PROBES)} (MODE@PROBE)")
    if a.views < 1 or a.rounds < 1 or a.warmup < 0:
        p.error("--views and --rounds must be >= 1, --warmup >= 0")
    try:
        a.specs = [parse_rasterizer(s) for s in a.rasterizers.split(",")]
        for spec in a.specs:
            for mode in a.modes:
                spec.settings.replace(backward=split_mode(mode)[0])  # a mode the variant refuses fails here
    except (ValueError, AttributeError) as e:
        p.error(f"--rasterizers/--modes: {e}")
    return a


class Case:
    """One scene, size and rasterizer: per mode, a forward graph per view to run backward from."""

    def __init__(self, g, cams, spec, modes):
        self.leaves = g.map(lambda t: t.detach().requires_grad_())
        self.graphs = {m: [] for m in modes}
        self.pairs = None
        for mode in modes:
            settings = spec.settings.replace(backward=split_mode(mode)[0])
            for i, cam in enumerate(cams):
                out = render(self.leaves, cam, settings, sh_degree=spec.sh_degree)
                target = torch.rand(out.image.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(i))
                grad_image = torch.sign(out.image.detach() - target) / out.image.numel()  # d L1 / d image
                self.graphs[mode].append((out, grad_image, torch.zeros_like(out.alpha)))
                self.pairs = self.pairs or int(out.num_pairs)

    def backward(self, mode: str, view: int):
        out, grad_image, grad_alpha = self.graphs[mode][view]
        inputs = [getattr(self.leaves, k) for k in NAMES[:-1]] + [out.means2d]
        with probing(split_mode(mode)[1]):
            return torch.autograd.grad((out.image, out.alpha), inputs, (grad_image, grad_alpha), retain_graph=True)


def kernel_ms(case: Case, mode: str) -> float:
    """The blend-backward kernels' GPU ms per backward, over one backward per view."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    views = len(case.graphs[mode])
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for v in range(views):
            case.backward(mode, v)
        torch.cuda.synchronize()
    # kernels only: an autograd node's row also counts the kernels it launched (tools/profile_step.py)
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA and "blend_backward" in e.name]
    if not kernels:
        raise RuntimeError(f"backward={mode}: the profiler saw no kernel named *blend_backward*")
    return sum(e.device_time_total for e in kernels) / views / 1e3


def max_rel_errors(case: Case, modes) -> dict:
    """Per GEMM mode and tensor, on view 0: max |g - g_exact| / max |g_exact|."""
    exact = case.backward("exact", 0)
    errors = {}
    for mode in checked(modes):
        got = case.backward(mode, 0)
        errors[mode] = {k: ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
                        for k, a, b in zip(NAMES, got, exact)}
    return errors


def measure(case: Case, modes, rounds: int, warmup: int) -> dict:
    device, views = torch.device("cuda"), len(case.graphs[modes[0]])
    for mode in modes:
        for v in range(views):
            for _ in range(warmup):
                case.backward(mode, v)
        kernel_ms(case, mode)  # the profiler's first start costs more; keep it out of the figures
    kernel = {m: [] for m in modes}
    wall = {m: [] for m in modes}
    for r in range(rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for mode in order:
            for v in range(views):
                wall[mode].append(timed(lambda: case.backward(mode, v), device)[1])
        for mode in order:
            kernel[mode].append(kernel_ms(case, mode))
    ref_k, ref_w = statistics.median(kernel["exact"]), statistics.median(wall["exact"])
    return {m: {"kernel_ms": statistics.median(kernel[m]), "backward_ms": statistics.median(wall[m]),
                "kernel_speedup": ref_k / statistics.median(kernel[m]),
                "backward_speedup": ref_w / statistics.median(wall[m]),
                "kernel_samples": kernel[m], "backward_samples": wall[m]} for m in modes}


def scenes(a) -> list:
    biker = a.biker or shared_dir() / "data/scenes/biker.compressed.ply"
    found = []
    for name, path in (("lego", a.lego), ("biker", biker)):
        if path is None:
            print(f"{name}: skipped (no --{name} given)")
        elif not path.exists():
            print(f"{name}: skipped ({path} not found)")
        else:
            found.append((name, path))
    return found


def table(rows, modes) -> str:
    head = ["scene", "size", "rasterizer", "Gaussians"] + [f"{m} kernel ms" for m in modes] \
        + [f"{m} backward ms" for m in modes] + [f"{m} max rel err" for m in checked(modes)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        t = r["modes"]
        cells = [r["scene"], r["size"], r["rasterizer"], f"{r['gaussians']:,}"]
        cells += [f"{t[m]['kernel_ms']:.3f}" + ("" if m == "exact" else f" ({t[m]['kernel_speedup']:.2f}x)")
                  for m in modes]
        cells += [f"{t[m]['backward_ms']:.3f}" + ("" if m == "exact" else f" ({t[m]['backward_speedup']:.2f}x)")
                  for m in modes]
        cells += [f"{max(r['max_rel_err'][m].values()):.1e}" for m in checked(modes)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def require_cuda(prog: str) -> None:
    """One line and exit where there is no GPU or the extension does not load (ncu_profile.py too)."""
    if not torch.cuda.is_available():
        sys.exit(f"{prog}: needs a CUDA GPU (the study times CUDA kernels); none is available here")
    from gsexp.render.cuda import CudaUnavailable, load

    try:
        load()
    except CudaUnavailable as e:
        sys.exit(f"{prog}: {e}")


def main(argv=None):
    a = parse_args(argv)
    require_cuda("bench.py")
    rows = []
    for name, path in scenes(a):
        g = load_gaussians(path).to("cuda")
        print(f"{name}: {len(g):,} Gaussians (SH degree {g.sh_degree}) from {path}", flush=True)
        for w, h in a.sizes:
            cams, _ = orbit_cameras(g.means, a.views, w, h, up=parse_up(SCENE_UP[name]), fov_deg=50.0)
            cams = [c.to("cuda") for c in cams]
            for spec in a.specs:
                start = time.perf_counter()
                case = Case(g, cams, spec, a.modes)
                errors = max_rel_errors(case, a.modes)
                row = {"scene": name, "path": str(path), "gaussians": len(g), "size": f"{w}x{h}",
                       "rasterizer": spec.text, "views": a.views, "rounds": a.rounds, "pairs_view0": case.pairs,
                       "modes": measure(case, a.modes, a.rounds, a.warmup), "max_rel_err": errors}
                rows.append(row)
                del case
                torch.cuda.empty_cache()
                t = row["modes"]
                print(f"  {w}x{h} {spec.text}: kernel ms " + ", ".join(
                    f"{m} {t[m]['kernel_ms']:.3f}" for m in a.modes) + "; max rel err " + ", ".join(
                    f"{m} {max(errors[m].values()):.1e}" for m in checked(a.modes))
                    + f" ({time.perf_counter() - start:.0f} s)", flush=True)
    if not rows:
        sys.exit("bench.py: no scene to bench (give --lego, and --biker or the shared biker)")
    report = {"command": "bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "device_name": torch.cuda.get_device_name(), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M"), "modes": a.modes,
              "upstream": "L1 against a fixed random target (sign / numel), alpha gradient zero",
              "rows": rows}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1))
    print(f"\n{len(rows)} cases, medians over {a.rounds} rounds x {a.views} orbit views; "
          f"(Nx) = exact / mode; max rel err = max over tensors of max |g - g_exact| / max |g_exact|; "
          f"results in {a.out}\n")
    print(table(rows, a.modes))


if __name__ == "__main__":
    main()
