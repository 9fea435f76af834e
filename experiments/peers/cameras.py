"""A split's cameras without its images, for renders made where the images cannot travel.

    python experiments/peers/cameras.py blender ../shared/data/nerf_synthetic/lego > lego_test.json
    python experiments/peers/cameras.py colmap scenes/beer --split test --option test_every=8

The GPU machine takes at most 64 MiB a call: lego's 200 test images (58 MiB as lossless WebP)
cannot go with its training set, but their cameras (80 KB of JSON) can. load() gives them back
as gsexp Cameras, in the loader's order, named as the loader names them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gsexp.scene import load_scene
from gsexp.scene.camera import Camera

FIELDS = ("fx", "fy", "cx", "cy", "width", "height", "name")


def to_json(cameras: list[Camera], scene: str, split: str) -> str:
    rows = [{"world_to_camera": c.world_to_camera.tolist(), **{k: getattr(c, k) for k in FIELDS}}
            for c in cameras]
    return json.dumps({"scene": scene, "split": split, "cameras": rows})


def load(path) -> list[Camera]:
    data = json.loads(Path(path).read_text())
    return [Camera(**row) for row in data["cameras"]]


def parse_option(text: str):
    key, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"cameras.py: --option takes key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", help="the scene loader: blender, colmap, llff, transforms, synthetic")
    p.add_argument("path")
    p.add_argument("--split", choices=("test", "train"), default="test")
    p.add_argument("--option", action="append", default=[], help="a loader option, key=value (repeatable)")
    a = p.parse_args(argv)
    scene = load_scene(a.kind, a.path, **dict(parse_option(o) for o in a.option))
    cams = scene.test_cameras if a.split == "test" else scene.train_cameras
    sys.stdout.write(to_json(cams, scene.name, a.split) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
