"""The render table of the peer study from render_session.sh's JSON (python -m gsexp.bench, one
file per scene and resolution), end-to-end median ms per frame and the ratios to our rows.

    python experiments/peers/render_table.py <folder of render JSON> [...]"""
from __future__ import annotations

import json
import sys
from pathlib import Path

OURS = ("vanilla:intersect=accutile", "tc_gs:intersect=accutile")
ORDER = ("biker", "lego_base", "lego_1M", "lego_3M", "lego_6M")


def rank(path: Path) -> tuple:
    scene, _, res = path.stem.rpartition("_")
    return (ORDER.index(scene) if scene in ORDER else len(ORDER), scene, int(res.split("x")[1]))


def table(folder: Path) -> list[str]:
    reports = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"), key=rank)]
    if not reports:
        return [f"{folder}: no render JSON"]
    peers = [r["name"] for r in reports[0]["rasterizers"] if r["name"] not in OURS]
    cfg = reports[0]["config"]
    lines = [f"{cfg['device_name']}, torch {cfg['torch']}; {cfg['cameras']['count']} orbit cameras, "
             f"{cfg['warmup']} warm-up + {cfg['frames']} timed frames each, {cfg['rounds']} interleaved rounds; "
             "end-to-end median ms per frame", "",
             "| scene | Gaussians | resolution | " + " | ".join(("vanilla fp32", "tc_gs fp16") + tuple(peers))
             + " | " + " | ".join(f"{p} ÷ {o}" for p in peers for o in ("vanilla", "tc_gs")) + " |",
             "|---|---:|---|" + "---:|" * (2 + len(peers) + 2 * len(peers))]
    for rep, path in zip(reports, sorted(folder.glob("*.json"), key=rank)):
        ms = {r["name"]: r["e2e"]["median"] for r in rep["rasterizers"]}
        cells = [f"{ms[n]:.3f}" if n in ms else "-" for n in OURS + tuple(peers)]
        ratios = [f"{ms[p] / ms[o]:.2f}×" if p in ms and o in ms else "-" for p in peers for o in OURS]
        c = rep["config"]
        lines.append(f"| {rank(path)[1]} | {c['num_gaussians']:,} | {c['resolution']} | "
                     + " | ".join(cells + ratios) + " |")
    return lines


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["."]:
        print("\n".join(table(Path(arg))), end="\n\n")
