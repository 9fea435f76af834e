"""How well the training photos cover each test view of a COLMAP scene (every Nth photo by name
is a test view, as data=colmap splits it).

    python experiments/real_captures/test_split.py <scene dir with sparse/0> [--test-every 8]

Per test view: its SfM points, the share of them that 2+ training photos see, the nearest
training camera (in median spacings between consecutive photos), and the share of an 8x8 grid
over the image that holds one of its SfM points."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from gsexp.scene.images import split_every


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scene", type=Path)
    p.add_argument("--test-every", type=int, default=8)
    a = p.parse_args(argv)
    if not (a.scene / "sparse/0").is_dir():
        p.error(f"{a.scene}: expected sparse/0 (a COLMAP model)")
    import pycolmap

    rec = pycolmap.Reconstruction(str(a.scene / "sparse/0"))
    name_of = {im.image_id: im.name for im in rec.images.values()}
    names = sorted(name_of.values())
    test = {names[i] for i in split_every(len(names), a.test_every)[1]}  # the loader's split
    centre = {im.name: im.projection_center() for im in rec.images.values()}
    spacing = np.median([np.linalg.norm(centre[b] - centre[a_]) for a_, b in zip(names, names[1:])])
    train = [n for n in names if n not in test]
    print("view       points  seen by 2+ train  nearest train (spacings)  grid cover")
    for im in sorted(rec.images.values(), key=lambda im: im.name):
        if im.name not in test:
            continue
        seen = [p for p in im.points2D if p.has_point3D()]
        covered = sum(len({name_of[e.image_id] for e in rec.points3D[p.point3D_id].track.elements} - test) >= 2
                      for p in seen)
        dist = {n: np.linalg.norm(centre[n] - centre[im.name]) / spacing for n in train}
        nearest = min(dist, key=dist.get)
        cam = rec.cameras[im.camera_id]
        cells = {(int(x * 8 // cam.width), int(y * 8 // cam.height)) for x, y in (p.xy for p in seen)}
        print(f"{im.name:10} {len(seen):6d}  {covered / max(len(seen), 1):16.2f}  "
              f"{dist[nearest]:9.2f} ({nearest})  {len(cells) / 64:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
