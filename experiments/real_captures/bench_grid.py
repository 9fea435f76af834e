"""The bilateral grid's cost per training step on a GPU (issue 41): csrc/bilateral.cu's kernels
against the torch ops they replaced, forward + backward of the slice and of the total variation,

    python experiments/real_captures/bench_grid.py [--sizes 720x1280,504x378] [--out grid.json]

Per size and path: the median over rounds of CUDA-event time for one step's worth of grid work
(slice, its backward, total variation and its backward) and a stand-in loss, and the host's time
to issue it (its launches; a step bound by the host pays that, not the GPU's time); and the same
loss without the grid, whose time taken from the others is the grid's own cost. First a check
that the two paths agree on one random grid (the grid's and the image's gradients, float32)."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gsexp.train.appearance import BilateralGridAppearance, total_variation  # noqa: E402


def step(app: BilateralGridAppearance, image: torch.Tensor, torch_path: bool | None) -> None:
    """One step's grid work and a stand-in loss; torch_path None: the loss alone (the baseline
    the grid's cost is read against)."""
    if torch_path is None:
        return image.square().mean().backward()
    grid = app.delta[0]
    out = app.sliced(image, grid) if torch_path else app.apply(image, 0)
    tv = total_variation(grid) if torch_path else app.regularization(0) / app.reg
    (out.square().mean() + tv).backward()


def grads(app, image, torch_path: bool):
    app.delta.grad = image.grad = None
    step(app, image, torch_path)
    return app.delta.grad.clone(), image.grad.clone()


def timed(app, image, torch_path: bool, rounds: int = 7, calls: int = 50) -> tuple[float, float]:
    """(GPU ms, host ms) a step: medians over rounds of the mean over calls."""
    for _ in range(5):
        step(app, image, torch_path)
    gpu, host = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        for _ in range(calls):
            step(app, image, torch_path)
        end.record()
        host.append((time.perf_counter() - t0) * 1e3 / calls)  # issuing, before any wait for the GPU
        torch.cuda.synchronize()
        gpu.append(start.elapsed_time(end) / calls)
    return statistics.median(gpu), statistics.median(host)


def table(rows: list[dict]) -> str:
    """The rows as a markdown table; where a path's host time exceeds its GPU time it is the cost."""
    lines = ["| size | kernels GPU ms | kernels host ms | torch GPU ms | torch host ms | loss alone GPU / host ms "
             "| speed-up | grid's own ms: kernels / torch | max rel. grad diff |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        kernels, torch_ops = (max(r[f"{p}_ms"], r[f"{p}_host_ms"]) for p in ("kernels", "torch"))
        alone = max(r["loss_alone_ms"], r["loss_alone_host_ms"])
        lines.append(f"| {r['size']} | {r['kernels_ms']:.3f} | {r['kernels_host_ms']:.3f} | {r['torch_ms']:.3f} | "
                     f"{r['torch_host_ms']:.3f} | {r['loss_alone_ms']:.3f} / {r['loss_alone_host_ms']:.3f} | "
                     f"{torch_ops / kernels:.1f}x | {kernels - alone:.3f} / {torch_ops - alone:.3f} | "
                     f"{r['max_rel_grad_diff']:.1e} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="720x1280,504x378", help="WxH list (beer, fern)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_grid.py: needs a CUDA GPU (it times csrc/bilateral.cu against the torch path)")
    torch.manual_seed(0)
    rows = []
    for size in args.sizes.split(","):
        w, h = (int(v) for v in size.split("x"))
        app = BilateralGridAppearance(1, "cuda")
        with torch.no_grad():
            app.delta.normal_(0, 0.05)
        image = torch.rand(3, h, w, device="cuda", requires_grad=True)
        (g_cuda, i_cuda), (g_torch, i_torch) = grads(app, image, False), grads(app, image, True)
        err = max(float((g_cuda - g_torch).abs().max() / g_torch.abs().max()),
                  float((i_cuda - i_torch).abs().max() / i_torch.abs().max()))
        (kernel_ms, kernel_host), (torch_ms, torch_host) = timed(app, image, False), timed(app, image, True)
        base_ms, base_host = timed(app, image, None)
        rows.append({"size": size, "kernels_ms": kernel_ms, "kernels_host_ms": kernel_host, "torch_ms": torch_ms,
                     "torch_host_ms": torch_host, "loss_alone_ms": base_ms, "loss_alone_host_ms": base_host,
                     "max_rel_grad_diff": err})
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; one grid step = slice + total variation, "
          "forward and backward (medians of 7 rounds x 50 steps)")
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
