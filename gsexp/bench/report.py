"""What a bench run leaves: the table it prints, the JSON report, the rendered images."""
from __future__ import annotations

import json
import math
import platform
from pathlib import Path

import numpy as np
import torch

from gsexp import metrics


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def add_psnr(rows) -> None:
    """Each row's mean PSNR against the first row's images."""
    for r in rows:
        r["psnr"] = float(np.mean([metrics.psnr(a, b).item() for a, b in zip(r["images"], rows[0]["images"])]))


def fmt_ms(v: float) -> str:
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def table(rows, num_gaussians: int, resolution: str) -> str:
    stage_names = list(dict.fromkeys(k for r in rows for k in r["stages"]))
    head = ["rasterizer"] + stage_names + ["e2e med", "e2e p90", "PSNR dB", "pairs", "gaussians", "resolution"]
    lines = [head]
    for i, r in enumerate(rows):
        psnr = "ref" if i == 0 else ("inf" if math.isinf(r["psnr"]) else f"{r['psnr']:.2f}")
        lines.append([r["name"]] + [fmt_ms(r["stages"][s]["median"]) if s in r["stages"] else "-"
                                    for s in stage_names]
                     + [fmt_ms(r["e2e"]["median"]), fmt_ms(r["e2e"]["p90"]), psnr,
                        "-" if r.get("pairs") is None else f"{r['pairs']:,.0f}", f"{num_gaussians:,}", resolution])
    widths = [max(len(line[c]) for line in lines) for c in range(len(head))]
    out = ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                     for c, (cell, w) in enumerate(zip(line, widths))) for line in lines]
    out.insert(1, "-" * len(out[0]))
    out.append("(stage columns and e2e med: medians in ms over all timed frames; PSNR vs the first row)")
    return "\n".join(out)


def make_report(config: dict, rows, skipped) -> dict:
    """The JSON report. PSNR vs the first row: null for the first row itself, "inf" (a string,
    so the file stays strict JSON) for identical images."""
    return {"config": config,
            "rasterizers": [{k: v for k, v in r.items() if k != "images"}
                            | {"psnr": None if i == 0 else ("inf" if math.isinf(r["psnr"]) else r["psnr"])}
                            for i, r in enumerate(rows)],
            "skipped": skipped}


def write_json(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


def save_images(folder: Path, rows, cameras) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(rows):
        label = "".join(c if c.isalnum() else "_" for c in r["name"])
        for cam, img in zip(cameras, r["images"]):
            pixels = (img.clamp(0, 1).permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}_{label}_{cam.name}.png")
