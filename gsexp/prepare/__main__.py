"""python -m gsexp.prepare <images dir> <scene dir> [options]

Structure from motion (SIFT features, exhaustive or sequential matching, incremental mapping) and
undistortion through pycolmap, on the CPU. The scene folder gets images/ (undistorted PNG) and
sparse/0 (PINHOLE cameras), which `python train.py data=colmap data.path=<scene dir>` reads,
plus distorted/sparse/0 (the model as mapped) and prepare.json; with --masks also masks/ (the
masks warped as their photos, for data.masks). The image and mask folders are only read.

A user error (too few or unreadable photos, nothing registered, a disconnected capture, a scene
folder in the way) prints one line and exits with 2.
"""
from __future__ import annotations

import argparse
import sys

from gsexp.errors import one_line
from gsexp.prepare.inputs import PrepareError
from gsexp.prepare.pipeline import prepare
from gsexp.prepare.progress import Display
from gsexp.prepare.sfm import CAMERA_MODELS, MATCHERS, SfmOptions

PROG = "python -m gsexp.prepare"
USER_ERRORS = (PrepareError, FileNotFoundError, NotADirectoryError, PermissionError, ValueError)


def build_parser() -> argparse.ArgumentParser:
    d = SfmOptions()
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("images", help="folder holding the photos (jpg, png, tif, bmp); only read")
    p.add_argument("scene", help="folder to write the scene to; new or empty unless --overwrite")
    p.add_argument("--camera-model", default=d.camera_model, choices=CAMERA_MODELS,
                   help="COLMAP camera model to estimate")
    p.add_argument("--single-camera", default=d.single_camera, action=argparse.BooleanOptionalAction,
                   help="one camera shared by every photo (same device and zoom); --no-single-camera: one per photo")
    p.add_argument("--max-size", type=int, default=d.max_size,
                   help="longer image side for features and the written images, in pixels; 0: as taken")
    p.add_argument("--matcher", default=d.matcher, choices=MATCHERS,
                   help="exhaustive: every pair (photos); sequential: neighbours in name order (video frames)")
    p.add_argument("--overlap", type=int, default=d.overlap, help="sequential: frames matched after each one")
    p.add_argument("--masks", metavar="FOLDER",
                   help="training masks, one per photo: named as the photo (any image type), of its size, white = "
                        "use; written undistorted like the photos to <scene>/masks/ for data.masks=<scene>/masks")
    p.add_argument("--keep-largest", action="store_true",
                   help="if the photos form several models, keep the largest instead of failing")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty scene folder (only after the new scene is complete)")
    p.add_argument("--quiet", action="store_true", help="no progress display, only the summary")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    opts = SfmOptions(camera_model=args.camera_model, single_camera=args.single_camera, max_size=args.max_size,
                      matcher=args.matcher, overlap=args.overlap, keep_largest=args.keep_largest)
    try:
        summary = prepare(args.images, args.scene, opts, masks=args.masks, overwrite=args.overwrite,
                          display=Display(quiet=args.quiet))
    except USER_ERRORS as err:
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the staging folder is already removed; the scene folder is as it was
        print(f"{PROG}: interrupted; {args.scene} was not changed", file=sys.stderr)
        return 130
    for line in summary.lines():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
