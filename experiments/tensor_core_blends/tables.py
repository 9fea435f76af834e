"""Markdown tables of a bench run (python -m gsexp.bench --json ...), with each variant's blend
and end-to-end ratio over the first row (our vanilla) and over gsplat when it ran.

    python experiments/tensor_core_blends/tables.py experiments/tensor_core_blends/biker_1x.json [...]"""
from __future__ import annotations

import json
import sys


def table(path: str) -> str:
    d = json.load(open(path))
    rows = d["rasterizers"]
    base = rows[0]
    gsplat = next((r for r in rows if r["name"].startswith("gsplat")), None)
    cfg = d["config"]
    out = [f"{cfg['resolution']}, {cfg['num_gaussians']:,} Gaussians ({path.rsplit('/', 1)[-1]})", "",
           "| variant | pairs | duplicate ms | sort ms | blend ms | blend vs vanilla | end to end ms | e2e vs vanilla "
           "| e2e vs gsplat | PSNR vs vanilla |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        blend = r["stages"].get("blend", {}).get("median")
        e2e = r["e2e"]["median"]
        stage = {k: r["stages"].get(k, {}).get("median") for k in ("duplicate", "sort")}
        cells = [r["name"],
                 f"{r['pairs']:,.0f}" if r.get("pairs") else "–",
                 *(f"{v:.3f}" if v else "–" for v in stage.values()),
                 f"{blend:.3f}" if blend else "–",
                 f"{base['stages']['blend']['median'] / blend:.2f}×" if blend else "–",
                 f"{e2e:.3f}",
                 f"{base['e2e']['median'] / e2e:.2f}×",
                 f"{gsplat['e2e']['median'] / e2e:.2f}×" if gsplat else "–",
                 "ref" if r is base else (f"{r['psnr']:.2f} dB" if r.get("psnr") is not None else "–")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(table(p) for p in sys.argv[1:]))
