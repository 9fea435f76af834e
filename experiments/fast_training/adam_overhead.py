"""The Python cost of fused_adam_step + zero_grads per training step, without any kernel: six
parameter groups of 100 rows on the CPU, the update itself stubbed out (what is left is what
the CPU spends issuing the GPU's one launch).

    python experiments/fast_training/adam_overhead.py [--repeats 5]
"""
import argparse
import statistics
import time

import torch

from gsexp.train import optim

SHAPES = {"means": (3,), "log_scales": (3,), "quats": (4,), "opacity_logits": (), "sh0": (1, 3), "shN": (15, 3)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=3000)
    a = p.parse_args()
    params = {k: torch.nn.Parameter(torch.randn(100, *s)) for k, s in SHAPES.items()}
    opts = {k: torch.optim.Adam([{"params": [v], "lr": 1e-3, "name": k}], eps=1e-15) for k, v in params.items()}
    optim._step_torch = lambda entry, mask: None  # no update: only the per-step Python remains

    def step():
        for v in params.values():
            v.grad = v.data
        optim.fused_adam_step(opts)
        optim.zero_grads(opts)

    step()
    runs = []
    for _ in range(a.repeats):
        start = time.perf_counter()
        for _ in range(a.steps):
            step()
        runs.append((time.perf_counter() - start) / a.steps * 1e6)
    print(f"fused_adam_step + zero_grads: median {statistics.median(runs):.1f} us per step "
          f"(runs {', '.join(f'{r:.1f}' for r in runs)})")


if __name__ == "__main__":
    main()
