"""How many torch ops a per-view feature adds to a training step, forward and backward (issue 41):

    python experiments/real_captures/feature_ops.py [<checkout>]

On a GPU each op is at least one launch from the host, and a step whose launches outrun its
kernels is bound by the host; the count, unlike a CPU timing, does not depend on the machine's
load. Counted with torch.profiler on the CPU: pose_opt's motion of 1,000 Gaussians, and the affine
and bilateral-grid transforms of a 64x64 render, each with its backward (caches warmed first);
then each timed on the CPU (median of 5 rounds of 300 calls), which does depend on the load.
<checkout>: another tree of the repository (`git worktree add /tmp/before <commit>`) to compare."""
from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path


def count(fn) -> int:
    from torch.profiler import ProfilerActivity, profile

    fn(), fn()  # first calls build caches
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if e.name.startswith("aten::"))


def host_us(fn, rounds: int = 5, calls: int = 300) -> float:
    """Median over rounds of the mean CPU microseconds a call: the host's share of a GPU step."""
    fn(), fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return sorted(times)[rounds // 2]


def main(repo: Path) -> str:
    if not (repo / "gsexp" / "train" / "pose.py").is_file():
        print(f"feature_ops.py: {repo} is not a gsexp checkout (no gsexp/train/pose.py); give a tree of "
              "this repository, e.g. from git worktree add", file=sys.stderr)
        raise SystemExit(2)
    sys.path.insert(0, str(repo))
    import torch

    from gsexp.gaussians import Gaussians
    from gsexp.scene import load_scene
    from gsexp.train.appearance import AffineAppearance, BilateralGridAppearance
    from gsexp.train.pose import PoseCorrection

    cams = load_scene("synthetic", num_gaussians=50, num_views=4, width=32, height=32, num_points=0).train_cameras
    g = torch.Generator().manual_seed(0)
    means, quats = torch.randn(1000, 3, generator=g).requires_grad_(), torch.randn(1000, 4, generator=g).requires_grad_()
    model = Gaussians(means, torch.randn(1000, 3, generator=g), quats, torch.randn(1000, generator=g),
                      torch.rand(1000, 1, 3, generator=g), 0)
    takes_cameras = "cameras" in inspect.signature(PoseCorrection.__init__).parameters  # since 90ba92c
    pose = PoseCorrection(cams if takes_cameras else len(cams), "cpu")
    image = torch.rand(3, 64, 64, requires_grad=True)

    def moved():
        m = pose.apply(model, 1) if takes_cameras else pose.apply(model, 1, cams[1])
        (m.means.sum() + m.quats.sum()).backward()

    ops = {"pose_opt": count(moved)}
    us = {"pose_opt": host_us(moved)}
    for name, feature in (("affine", AffineAppearance), ("bilateral_grid", BilateralGridAppearance)):
        a = feature(len(cams), "cpu")
        ops[name] = count(lambda: a.apply(image, 1).sum().backward())
        us[name] = host_us(lambda: a.apply(image, 1).sum().backward())
    return " | ".join(f"{k} {v} ops, {us[k]:.0f} us" for k, v in ops.items())


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]).resolve()))
