"""Fit a scene's PNGs into a GPU call's 64 MiB: lossless WebP copies here, PNGs again there.

    python experiments/webp_stage.py pack .device/data/lego .device/lego_webp      # here (lego: 52 -> 38 MB)
    python experiments/webp_stage.py unpack .device/lego_webp /tmp/lego            # on the GPU machine

`exact` keeps the colour under fully transparent pixels (WebP drops it by default), and the
md5 of every decoded image is checked against the original's, so the training data is
pixel-identical. JSON files are copied as they are.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image


def digest(im: Image.Image) -> str:
    return hashlib.md5(np.asarray(im).tobytes()).hexdigest()


def pack_one(job) -> tuple[str, str]:
    src, dst, rel = job
    im = Image.open(src / rel)
    out = (dst / rel).with_suffix(".webp")
    out.parent.mkdir(parents=True, exist_ok=True)
    im.save(out, "WEBP", lossless=True, quality=100, method=4, exact=True)
    return rel, digest(im)


def unpack_one(job) -> bool:
    src, dst, rel, expected = job
    im = Image.open((src / rel).with_suffix(".webp"))
    out = dst / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    im.save(out, "PNG", compress_level=1)
    return digest(im) == expected


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["pack", "unpack"])
    p.add_argument("src", type=Path)
    p.add_argument("dst", type=Path)
    p.add_argument("--jobs", type=int, default=8)
    a = p.parse_args(argv)
    a.dst.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(a.jobs) as ex:
        if a.mode == "pack":
            rels = [str(q.relative_to(a.src)) for q in sorted(a.src.rglob("*.png"))]
            sums = dict(ex.map(pack_one, [(a.src, a.dst, r) for r in rels]))
            (a.dst / "md5.json").write_text(json.dumps(sums))
            ok = [True] * len(sums)
        else:
            sums = json.loads((a.src / "md5.json").read_text())
            ok = list(ex.map(unpack_one, [(a.src, a.dst, r, h) for r, h in sums.items()]))
    for j in a.src.glob("*.json"):
        if j.name != "md5.json":
            shutil.copy(j, a.dst / j.name)
    print(f"{a.mode}: {sum(ok)}/{len(ok)} images pixel-identical")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
