"""python -m gsexp.view MODEL [--port N] [--host H] [--height PX] [--device cpu|cuda] [--up AXIS]

MODEL: a run directory (its newest checkpoint), a trainer checkpoint (.pt), a PLY (INRIA or
compressed) or a .splat file. A run's .hydra/config.yaml beside the model gives its scene's
training cameras (drawn as frustums; click one to look through it), its background and the
rasterizer to start on. Open the printed address in a browser: drag to orbit, right-drag to
pan, scroll to zoom, WASD/QE to fly. The panel picks the rasterizer (the torch reference's
formulas anywhere; vanilla, gemm_gs and tc_gs with a GPU), the intersect mode, the render
height and the SH bands, and shows FPS, frame and render time, and per-stage ms.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROG = "python -m gsexp.view"


def main(argv=None) -> int:
    from gsexp.bench.cameras import parse_up
    from gsexp.cli import join_up_value
    from gsexp.errors import USER_ERRORS, one_line
    from gsexp.train.setup import pick_device
    from gsexp.view.server import Viewer, serve_forever
    from gsexp.view.source import load_source

    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path, help="run directory, checkpoint .pt, .ply or .splat")
    p.add_argument("--port", type=int, default=8080, help="the port (0: any free one); default 8080")
    p.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to serve other machines; default loopback")
    p.add_argument("--height", type=int, help="render height in pixels (default 1080 on a GPU, 256 on a CPU)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--up", help="the world's up to open on: x, -y, +z or 'x,y,z' (default: the training "
                                "cameras' up; a bare PLY has none: try --up z or --up -y)")
    args = p.parse_args(join_up_value(argv))
    try:
        up = None if args.up is None else parse_up(args.up).numpy()
    except ValueError as e:
        p.error(f"--up: {e}")
    print(f"{PROG}: {loading_message(args.model, args.up)}", flush=True)
    try:
        source = load_source(args.model)
        device = pick_device(args.device)
    except USER_ERRORS as err:
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        return 2
    viewer = Viewer(source, host=args.host, port=args.port, device=device, height=args.height, up=up)
    print(f"{PROG}: {source.name}: {len(source.gaussians):,} Gaussians, {len(source.train_cameras)} training "
          f"cameras, on {device}; open {viewer.url}", flush=True)
    serve_forever(viewer)
    return 0


def loading_message(model: Path, up: str | None) -> str:
    """What is about to load: the run's scene comes only with a run config beside the model."""
    from gsexp.eval import find_run_config
    from gsexp.view.source import scene_label

    run = find_run_config(model) if model.exists() else None
    if run is not None and "data" in run:
        return f"loading {model} and its run's scene ({scene_label(run.data)}), for the cameras"
    up_from = f"up {up}, from --up" if up else "up +z; --up -y for a COLMAP or INRIA model"
    return f"loading {model} alone (no run config beside it, so no cameras; {up_from})"


if __name__ == "__main__":
    sys.exit(main())
