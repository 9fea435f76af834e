"""The bench's command line (`python -m gsexp.bench`; see gsexp/bench/__init__.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import gsexp.bench as package
from gsexp.bench import timing
from gsexp.bench.cameras import eval_cameras, orbit_cameras, parse_up
from gsexp.bench.models import load_checkpoint_gaussians
from gsexp.bench.rasterizers import PEER, PEERS, make_rasterizer, parse_rasterizer
from gsexp.bench.report import add_psnr, device_name, make_report, save_images, table, write_json
from gsexp.cli import Parser, join_up_value
from gsexp.gaussians import load_ply
from gsexp.scene import KINDS


def build_parser() -> argparse.ArgumentParser:
    default_rast = "vanilla" if torch.cuda.is_available() else "torch"
    p = Parser(prog="python -m gsexp.bench", description=package.__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ply", type=Path, help="Gaussians in an INRIA or compressed PLY")
    src.add_argument("--checkpoint", type=Path, help="a trainer checkpoint (.pt) or run directory")
    p.add_argument("--cameras", choices=("orbit", "test"), default="orbit")
    p.add_argument("--num-cameras", type=int, default=8,
                   help="orbit: how many; test: evenly spaced subset, 0 = all (default 8)")
    p.add_argument("--width", type=int, default=1920, help="orbit image width")
    p.add_argument("--height", type=int, default=1080, help="orbit image height")
    p.add_argument("--up", default="-y", help="orbit world up: x, -y, +z or 'x,y,z' (default -y, "
                   "the usual INRIA/COLMAP PLY; use z for Blender scenes)")
    p.add_argument("--fov", type=float, default=50.0,
                   help="orbit field of view of the narrower side, degrees")
    p.add_argument("--data-kind", choices=KINDS, help="scene loader for --cameras test")
    p.add_argument("--data-path", type=Path, help="scene folder for --cameras test")
    p.add_argument("--scale", type=float, default=1.0, help="resize factor for test cameras")
    p.add_argument("--rasterizers", default=default_rast,
                   help=f"comma list of variant[:key=value]... (default {default_rast})")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat the whole set this many times, interleaved (frames per camera per round)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--no-gsplat", action="store_true", help="skip the gsplat peer")
    p.add_argument("--json", type=Path, help="write all figures here")
    p.add_argument("--save-images", type=Path, metavar="DIR",
                   help="write each rasterizer's renders as PNG")
    return p


def check_args(parser, args) -> torch.device:
    if args.frames < 1 or args.rounds < 1 or args.warmup < 0 or args.num_cameras < 0:
        parser.error("--frames and --rounds must be >= 1, --warmup and --num-cameras >= 0")
    if args.cameras == "orbit" and args.num_cameras < 1:
        parser.error("--num-cameras must be >= 1 for orbit cameras")
    if args.cameras == "test" and (args.data_kind is None or args.data_path is None):
        parser.error("--cameras test needs --data-kind and --data-path")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")
    return device


def parse_specs(parser, text: str, device: torch.device) -> list:
    """Every spec checked before any data is read; bad ones fail naming themselves."""
    specs = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        try:
            spec = parse_rasterizer(item)
        except ValueError as e:
            parser.error(f"--rasterizers {item!r}: {e}")
        backend = spec.settings.backend if spec.settings else spec.variant
        if backend != "torch" and not torch.cuda.is_available():
            parser.error(f"--rasterizers {item!r} needs a GPU and this machine has none; use --rasterizers torch")
        if backend != "torch" and device.type != "cuda":
            parser.error(f"--rasterizers {item!r} needs --device cuda")
        specs.append(spec)
    if not specs:
        parser.error("--rasterizers: give at least one")
    return specs


def load_input(parser, args):
    flag, path = ("--ply", args.ply) if args.ply else ("--checkpoint", args.checkpoint)
    try:
        return (load_ply(path) if args.ply else load_checkpoint_gaussians(path)), flag, path
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        parser.error(f"{flag} {path}: cannot read it: {e}")


def make_cameras(parser, args, g):
    """(cameras, background, info) for --cameras orbit | test."""
    if args.cameras == "test":
        return eval_cameras(args.data_kind, args.data_path, args.num_cameras, args.scale)
    try:
        up = parse_up(args.up)
    except ValueError as e:
        parser.error(f"--up: {e}")
    cameras, info = orbit_cameras(g.means, args.num_cameras, args.width, args.height, up=up, fov_deg=args.fov)
    return cameras, (0.0, 0.0, 0.0), info


def make_rasterizers(parser, args, specs, g, background, device):
    """The specs' rasterizers, then gsplat as a peer on CUDA unless skipped or already listed."""
    rasterizers, skipped = [], []
    for spec in specs:
        try:
            rasterizers.append(make_rasterizer(spec, g, background))
        except ImportError as e:  # an explicit gsplat spec without gsplat
            parser.error(f"--rasterizers {spec.text!r}: {e}")
    if any(s.variant in PEERS for s in specs):
        return rasterizers, skipped
    if args.no_gsplat:
        skipped.append("gsplat: skipped (--no-gsplat)")
    elif device.type != "cuda":
        skipped.append("gsplat: skipped (needs a CUDA device)")
    else:
        try:
            rasterizers.append(make_rasterizer(PEER, g, background))
        except Exception as e:  # not installed, or a broken install: the bench goes on without it
            skipped.append(f"gsplat: skipped ({type(e).__name__}: {e})")
    return rasterizers, skipped


def run_config(args, argv, g, cameras, camera_info, background, device, source) -> dict:
    flag, path = source
    return {"input": {"kind": flag.lstrip("-"), "path": str(path)}, "num_gaussians": len(g),
            "sh_degree": g.sh_degree,
            "cameras": {"kind": args.cameras, "count": len(cameras), "names": [c.name for c in cameras],
                        **camera_info},
            "resolution": ", ".join(dict.fromkeys(f"{c.width}x{c.height}" for c in cameras)),
            "warmup": args.warmup, "frames": args.frames, "rounds": args.rounds, "background": list(background),
            "device": str(device), "device_name": device_name(device), "torch": torch.__version__,
            "argv": list(sys.argv[1:] if argv is None else argv)}


def main(argv=None) -> dict:
    parser = build_parser()
    args = parser.parse_args(join_up_value(argv))
    device = check_args(parser, args)
    specs = parse_specs(parser, args.rasterizers, device)
    g, flag, path = load_input(parser, args)
    g = g.to(device)
    cameras, background, camera_info = make_cameras(parser, args, g)
    cameras = [c.to(device) for c in cameras]  # once, outside the timed renders
    rasterizers, skipped = make_rasterizers(parser, args, specs, g, background, device)
    with torch.no_grad():
        for r in rasterizers:  # one untimed render each: failures name the spec before any timing
            try:
                r.render(cameras[0], False)
            except (ValueError, TypeError) as e:
                parser.error(f"--rasterizers {r.name!r}: {e}")
        rows = timing.bench_all(rasterizers, cameras, args.warmup, args.frames, device, args.rounds)
    add_psnr(rows)
    config = run_config(args, argv, g, cameras, camera_info, background, device, (flag, path))
    report = make_report(config, rows, skipped)
    if args.save_images:
        save_images(args.save_images, rows, cameras)
    if args.json:
        write_json(args.json, report)
    print(f"{len(g):,} Gaussians (SH degree {g.sh_degree}) from {path}; {len(cameras)} {args.cameras} cameras at "
          f"{config['resolution']}; {args.warmup} warm-up + {args.frames} timed frames per camera; "
          f"{config['device_name']}, torch {torch.__version__}", *skipped, sep="\n")
    print(table(rows, len(g), config["resolution"]))
    return report
