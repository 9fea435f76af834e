"""TC-GS / GEMM-GS numerics on CPU: PSNR of each blend formulation and operand precision,
with and without G2L, against the fp32 vanilla render of a trained scene (biker).

    python experiments/tcgs_precision/run.py [--shared ../shared] [--sizes 256 1024]

Prints a table and writes results.json beside this file.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from gsexp.gaussians import load_ply
from gsexp.metrics import psnr
from gsexp.paths import shared_dir
from gsexp.render import make_settings, render
from gsexp.scene import framing_camera

HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=shared_dir())
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--out", default=HERE / "results.json")
    args = ap.parse_args()
    g = load_ply(Path(args.shared) / "data/scenes/biker.compressed.ply")
    rows = []
    torch.set_grad_enabled(False)
    for size in args.sizes:
        cam = framing_camera(g.means, size, size)
        ref = render(g, cam).image
        for blend in ("gemm", "tcgs"):
            for precision in ("fp32", "tf32", "fp16"):
                for g2l in (True, False):
                    start = time.perf_counter()
                    settings = make_settings("torch", blend=blend, precision=precision, g2l=g2l)
                    img = render(g, cam, settings).image
                    rows.append(dict(size=size, blend=blend, precision=precision, g2l=g2l,
                                     psnr_db=round(psnr(img, ref).item(), 2),
                                     max_abs_err=float((img - ref).abs().max()),
                                     seconds=round(time.perf_counter() - start, 2)))
                    print(rows[-1], flush=True)
    Path(args.out).write_text(json.dumps({"scene": "biker.compressed.ply (152,746 Gaussians)",
                                          "reference": "vanilla fp32", "rows": rows}, indent=1))
    print(f"\n{'size':>5} {'blend':>6} {'prec':>5} {'g2l':>5} {'PSNR dB':>8} {'max err':>9}")
    for r in rows:
        print(f"{r['size']:>5} {r['blend']:>6} {r['precision']:>5} {str(r['g2l']):>5} "
              f"{r['psnr_db']:>8} {r['max_abs_err']:>9.2e}")


if __name__ == "__main__":
    main()
