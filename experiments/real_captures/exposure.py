"""Do a capture's photos disagree in exposure or white balance? Measured from the SfM model:
every 3D point is seen in several photos; the colour each photo records there, against the
point's median over its photos, gives a per-photo gain per channel.

    python experiments/real_captures/exposure.py <scene dir with images/ and sparse/0> [--test-every 8]

Prints each photo's gain (median over its points of observed colour / the median colour the
other photos record there, from a 5x5 box around the keypoint; points seen in 3+ photos), their spread, and the PSNR ceiling a model with one appearance would hit
on a photo from its gain alone: a gain g on an image of RMS intensity r costs RMSE |g - 1| r."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from gsexp.scene.images import split_every


def box_colours(image: np.ndarray, xy: np.ndarray, radius: int = 2) -> np.ndarray:
    """[K, 3] mean colour of the (2r+1)^2 box around each keypoint (COLMAP: pixel centres at +0.5)."""
    h, w = image.shape[:2]
    cols = np.clip(np.floor(xy[:, 0]).astype(int), radius, w - 1 - radius)
    rows = np.clip(np.floor(xy[:, 1]).astype(int), radius, h - 1 - radius)
    offsets = np.arange(-radius, radius + 1)
    patch = image[rows[:, None, None] + offsets[None, :, None], cols[:, None, None] + offsets[None, None, :]]
    return patch.reshape(len(xy), -1, 3).mean(1)


def gains(scene: Path, min_level: float = 0.1):
    """{image name: (gain [3], points used, RMS intensity)}"""
    import pycolmap

    rec = pycolmap.Reconstruction(str(scene / "sparse/0"))
    obs = {}  # point id -> list of (image name, colour)
    rms = {}
    for im in rec.images.values():
        pixels = np.asarray(Image.open(scene / "images" / im.name).convert("RGB"), dtype=np.float64) / 255
        rms[im.name] = float(np.sqrt((pixels ** 2).mean()))
        seen = [(p.xy, p.point3D_id) for p in im.points2D if p.has_point3D()]
        if not seen:
            continue
        colours = box_colours(pixels, np.array([xy for xy, _ in seen]))
        for (_, pid), c in zip(seen, colours):
            obs.setdefault(pid, []).append((im.name, c))
    ratios = {name: [] for name in rms}
    for views in obs.values():
        if len(views) < 3:
            continue
        colours = np.stack([c for _, c in views])
        for i, (name, c) in enumerate(views):
            ref = np.median(np.delete(colours, i, 0), 0)  # the other photos: a photo is not its own reference
            if ref.min() >= min_level:  # dark points: noise and clipping dominate the ratio
                ratios[name].append(c / ref)
    return {name: (np.median(np.stack(r), 0) if r else np.full(3, np.nan), len(r), rms[name])
            for name, r in ratios.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scene", type=Path)
    p.add_argument("--test-every", type=int, default=8, help="the loader's test split (every Nth photo by name)")
    a = p.parse_args(argv)
    if not (a.scene / "sparse/0").is_dir() or not (a.scene / "images").is_dir():
        p.error(f"{a.scene}: expected images/ and sparse/0 (a COLMAP scene)")
    result = gains(a.scene)
    names = sorted(result)
    _, test = split_every(len(names), a.test_every)  # the loader's split of the sorted names
    print("photo      split  points  gain R  gain G  gain B  luma gain  PSNR ceiling")
    lumas = []
    for i, name in enumerate(names):
        g, n, r = result[name]
        luma = float(g @ np.array([0.299, 0.587, 0.114]))
        lumas.append(luma)
        err = float(np.sqrt((((g - 1) * r) ** 2).mean()))
        ceiling = "inf" if err == 0 else f"{-20 * math.log10(err):.1f} dB"
        split = "test" if i in test else "train"
        print(f"{name:10} {split:5} {n:7d}  {g[0]:.3f}   {g[1]:.3f}   {g[2]:.3f}   {luma:.3f}      {ceiling}")
    lumas = np.array(lumas)
    print(f"luma gain over {len(names)} photos: median {np.nanmedian(lumas):.3f}, "
          f"5-95 % {np.nanpercentile(lumas, 5):.3f}-{np.nanpercentile(lumas, 95):.3f}, "
          f"min {np.nanmin(lumas):.3f}, max {np.nanmax(lumas):.3f}, std {np.nanstd(lumas):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
