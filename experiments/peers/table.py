"""The lego table from one session's files: each run's training time and Gaussians beside
score.py's 200-view scores (scores*/: one folder per LPIPS backbone), one row per run, then
each trainer's median time.

    python experiments/peers/table.py /tmp/peers          # runs/*.json + scores*/*.json under it
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def rows(root: Path) -> list[dict]:
    out = []
    for run in sorted((root / "runs").glob("*.json")):
        record = json.loads(run.read_text())
        if not isinstance(record, dict) or "train_seconds" not in record:
            continue  # not a training's summary (fast_recipes' hostprof writes its profile here)
        score, views = {}, 0
        for file in sorted(root.glob(f"scores*/{run.name}")):  # one folder per LPIPS backbone
            scored = json.loads(file.read_text())
            score, views = score | scored["mean"], scored["views"]
        trainer, _, rnd = run.stem.rpartition("_r")
        out.append({"trainer": trainer, "round": rnd, "train_s": record["train_seconds"],
                    "gaussians": record["num_gaussians"], **score, "views": views})
    return out


def markdown(table: list[dict]) -> str:
    lines = ["| run | round | train s | Gaussians | PSNR | SSIM | LPIPS-VGG | LPIPS-Alex | views |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lpips = " | ".join(f"{r[k]:.4f}" if k in r else "–" for k in ("lpips_vgg", "lpips_alex"))
        q = f"{r['psnr']:.2f} | {r['ssim']:.4f} | {lpips}" if "psnr" in r else "– | – | – | –"
        lines.append(f"| {r['trainer']} | {r['round']} | {r['train_s']:.1f} | {r['gaussians']:,} | {q} | {r['views']} |")
    medians = {}
    for r in table:
        medians.setdefault(r["trainer"], []).append(r["train_s"])
    lines.append("")
    lines += [f"{t}: median {statistics.median(s):.1f} s over {len(s)} run(s)" for t, s in medians.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(rows(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/peers"))))
