"""Train lego with each training configuration in turn on one GPU machine, then (optionally) the
peer trainer, and print one table: train_seconds, test PSNR/SSIM/LPIPS, Gaussians, peak memory,
median ms per step phase.

    python experiments/fast_training/run.py --data <lego> --out results/ [--iterations 30000]
        [--configs fast,vanilla_fast,...] [--peer]

Each configuration is a list of train.py overrides (CONFIGS below); runs go one after the other.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {  # overrides on top of experiment=lego_fast (tc_gs + accutile, every pure speed-up)
    "fast": [],
    "vanilla_fast": ["rasterizer=vanilla"],
    "with_sync": ["pair_capacity=false"],                   # read the pair count back every step
    "sparse_adam": ["sparse_adam=true"],
    "no_fused_ssim": ["fused_ssim=false"],
    "no_fused_adam": ["fused_adam=false"],
    "no_fused": ["fused_ssim=false", "fused_adam=false"],
    "gemm_fp32": ["rasterizer.backward=gemm_fp32"],         # issue 20: the tensor-core backward
    "gemm_tf32": ["rasterizer.backward=gemm_tf32"],
    "viewer": ["viewer.enabled=true"],                      # issue 22: the live viewer, no browser connected
}


def train(name: str, overrides: list[str], data: str, iterations: int, out: Path, extra: list[str]) -> dict:
    run_dir = out / name
    cmd = [sys.executable, "train.py", "experiment=lego_fast", f"data.path={data}", f"iterations={iterations}",
           "logger=none", "checkpoint_every=0", f"hydra.run.dir={run_dir}", *extra, *overrides]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    s = json.loads((run_dir / "summary.json").read_text())
    return {"config": name, "overrides": " ".join(overrides), **{k: s.get(k) for k in (
        "train_seconds", "psnr", "ssim", "lpips", "num_gaussians", "peak_memory_mb", "phase_ms", "pair_overflows")}}


def peer(data: str, iterations: int, out: Path) -> dict:
    """gsplat through the project's harness (experiments/peers/train_gsplat.py), lego_fast's data and
    init; its PSNR is the harness's quick in-process one (experiments/peers/score.py scores renders)."""
    path = out / "gsplat.json"
    cmd = [sys.executable, str(REPO / "experiments/peers/train_gsplat.py"), "--experiment", "lego_fast",
           "--path", data, "--iters", str(iterations), "--out", str(path), "--renders", str(out / "gsplat_renders")]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    s = json.loads(path.read_text())
    quick = s["renders"]["quick_psnr"]
    return {"config": s["trainer"].split(",")[0] + " (peer)", "overrides": "", "train_seconds": s["train_seconds"],
            "psnr": quick and quick["mean"], "num_gaussians": s["num_gaussians"],
            "peak_memory_mb": (s.get("peak_gpu_memory_gib") or 0) * 1024}


def number(value, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "–"


def table(rows: list[dict]) -> str:
    phases = ("render", "loss", "backward", "densify", "optimizer")
    head = ["config", "train s", "PSNR", "SSIM", "LPIPS", "#G", "peak MB", *[f"{p} ms" for p in phases]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ph = r.get("phase_ms") or {}
        cells = [r["config"], *(number(r.get(k), f) for k, f in (("train_seconds", ".1f"), ("psnr", ".2f"), ("ssim", ".4f"),
                 ("lpips", ".4f"), ("num_gaussians", ",.0f"), ("peak_memory_mb", ",.0f"))),
                 *(number(ph.get(p), ".3f") for p in phases)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--iterations", type=int, default=30000)
    p.add_argument("--configs", default="fast")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for every configuration (e.g. lpips_net=alex where only AlexNet is staged)")
    p.add_argument("--peer", action="store_true", help="also train gsplat (experiments/peers/train_gsplat.py), after ours")
    a = p.parse_args(argv)
    unknown = [n for n in a.configs.split(",") if n not in CONFIGS]
    if unknown:
        p.error(f"--configs: unknown {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in a.configs.split(",") + (["peer"] if a.peer else []):
        rows.append(peer(a.data, a.iterations, a.out) if name == "peer"
                    else train(name, CONFIGS[name], a.data, a.iterations, a.out, a.set))
        # results.json after every run: a session cut short keeps what finished
        stamp = time.strftime("%Y-%m-%d %H:%M")
        (a.out / "results.json").write_text(json.dumps({"when": stamp, "iterations": a.iterations, "rows": rows},
                                                       indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
