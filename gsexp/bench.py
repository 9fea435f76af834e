"""Render benchmark: time rasterizers on fixed cameras, compare their images.

    python -m gsexp.bench --ply scene.ply [--rasterizers torch,cuda:tcgs:precision=fp16]
    python -m gsexp.bench --checkpoint run/checkpoints/step_030000.pt --cameras test \\
        --data-kind blender --data-path ../shared/data/nerf_synthetic/lego

A rasterizer spec is `backend[:blend][:key=value]...`, e.g. `cuda`, `cuda:gemm`,
`cuda:tcgs:precision=fp16:g2l=false`, `cuda:tcgs:intersect=accutile`; keys are render()
settings: blend, precision, g2l, early_cull, batch, half_blend, intersect, sh_degree (values
true/false, numbers, or text).
For each rasterizer and camera: `--warmup` untimed renders, then `--frames` timed ones.
Median and p90 are taken over all timed frames of all cameras. PSNR is against the
first rasterizer's images. gsplat, when importable on a CUDA device, runs as a peer.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from gsexp import metrics
from gsexp.gaussians import Gaussians, load_ply, sh_degree_of
from gsexp.render import BACKENDS, render
from gsexp.render.constants import NEAR_PLANE
from gsexp.scene import KINDS, Camera, load_scene, look_at

RENDER_SETTINGS = ("blend", "precision", "g2l", "early_cull", "batch", "half_blend", "intersect", "sh_degree")
AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}


@dataclass
class Rasterizer:
    name: str
    render: Callable  # (camera, timing: bool) -> (image [3,H,W], stage_ms dict)
    settings: dict = field(default_factory=dict)
    has_stages: bool = True
    pairs: list = field(default_factory=list)  # (tile, Gaussian) pairs of each render, when known


def parse_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_rasterizer(spec: str) -> tuple[str, dict]:
    """'cuda:tcgs:precision=fp16' -> ('cuda', {'blend': 'tcgs', 'precision': 'fp16'})."""
    backend, *parts = spec.strip().split(":")
    settings = {}
    for i, part in enumerate(parts):
        if "=" in part:
            key, value = part.split("=", 1)
            if key not in RENDER_SETTINGS:
                raise ValueError(f"unknown setting {key!r}; known: {', '.join(RENDER_SETTINGS)}")
            settings[key] = parse_value(value)
        elif i == 0:
            settings["blend"] = part
        else:
            raise ValueError(f"{part!r} is not key=value (only the blend may be given bare, first)")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; available here: {', '.join(BACKENDS)}")
    return backend, settings


def parse_up(text: str) -> torch.Tensor:
    """'z', '-y', '+x' or 'x,y,z'."""
    sign, axis = (-1.0, text[1:]) if text.startswith("-") else (1.0, text.lstrip("+"))
    if axis in AXES:
        return sign * torch.tensor(AXES[axis], dtype=torch.float64)
    vec = torch.tensor([float(v) for v in text.split(",")], dtype=torch.float64)
    if vec.shape != (3,) or vec.norm() == 0:
        raise ValueError(f"expected an axis (x, -y, +z) or three numbers, got {text!r}")
    return vec / vec.norm()


def load_checkpoint_gaussians(path: Path) -> Gaussians:
    from gsexp.train.checkpoint import latest_checkpoint, load_checkpoint
    from gsexp.train.params import to_gaussians

    if path.is_dir():  # a run directory: its newest checkpoint
        found = latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"no checkpoints in {path / 'checkpoints'}")
        path = found
    payload = load_checkpoint(path)
    params = payload.get("params") if isinstance(payload, dict) else None
    if not isinstance(params, dict) or "shN" not in params:
        raise ValueError(f"{path} is not a gsexp trainer checkpoint (no 'params' with 'shN')")
    try:  # the stored degree, whatever the run's schedule reached
        degree = sh_degree_of(1 + params["shN"].shape[1])
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return to_gaussians(params, degree).detach()


def orbit_cameras(means: torch.Tensor, n: int, width: int, height: int, *, up: torch.Tensor,
                  fov_deg: float = 50.0, elevation_deg: float = 20.0, coverage: float = 90.0):
    """n cameras on a circle around the median centre, looking at it, far enough that a sphere
    holding `coverage` % of the centres fits the narrower field of view. Median and percentile
    rather than the bounding box: stray far-away Gaussians would shrink the scene to a dot."""
    pts = means.detach().double().cpu().numpy()
    centre = torch.from_numpy(np.median(pts, axis=0))
    radius = float(np.percentile(np.linalg.norm(pts - centre.numpy(), axis=1), coverage)) or 1.0
    half_fov = math.radians(fov_deg) / 2
    focal = 0.5 * min(width, height) / math.tan(half_fov)
    distance = radius / math.sin(half_fov)
    # Two directions spanning the plane perpendicular to `up`.
    helper = torch.eye(3, dtype=torch.float64)[up.abs().argmin()]
    a = torch.linalg.cross(up, helper)
    a = a / a.norm()
    b = torch.linalg.cross(up, a)
    elev = math.radians(elevation_deg)
    cameras = []
    for i in range(n):
        theta = 2 * math.pi * i / n
        direction = math.cos(elev) * (math.cos(theta) * a + math.sin(theta) * b) + math.sin(elev) * up
        eye = centre + distance * direction
        cameras.append(Camera(look_at(eye.tolist(), centre.tolist(), up.tolist()), focal, focal,
                              width / 2, height / 2, width, height, name=f"orbit_{i:02d}"))
    info = {"centre": centre.tolist(), "radius": radius, "distance": distance, "fov_deg": fov_deg,
            "elevation_deg": elevation_deg, "up": up.tolist()}
    return cameras, info


def gsexp_rasterizer(spec: str, g: Gaussians, background) -> Rasterizer:
    backend, settings = parse_rasterizer(spec)

    def run(camera, timing):
        extra = {"timing": True} if timing else {}  # only asked for when the render didn't fill it
        out = render(g, camera, backend=backend, background=background, **settings, **extra)
        r.pairs.append(out.num_pairs)
        return out.image, out.stage_ms

    r = Rasterizer(spec, run, {"backend": backend, **settings})
    return r


def gsplat_rasterizer(g: Gaussians, background) -> Rasterizer:
    import gsplat

    bg = torch.tensor(background, dtype=torch.float32, device=g.device)

    cache = {}  # per camera, made once: the matrices a caller of gsplat keeps on the GPU

    def run(camera, timing):
        if id(camera) not in cache:
            k = torch.tensor([[camera.fx, 0.0, camera.cx], [0.0, camera.fy, camera.cy], [0.0, 0.0, 1.0]],
                             device=g.device)
            cache[id(camera)] = (camera.world_to_camera.to(g.device)[None], k[None])
        viewmat, k = cache[id(camera)]
        # Same cx, cy: gsplat's pixel centres sit at +0.5, as in gsexp's Camera. Activations
        # (exp, sigmoid) inside the timed call, as render() does them too.
        colors, alphas, _ = gsplat.rasterization(
            g.means, g.quats, g.scales, g.opacities, g.sh, viewmat, k,
            camera.width, camera.height, near_plane=NEAR_PLANE, sh_degree=g.sh_degree)
        image = colors[0].permute(2, 0, 1)
        if background != (0.0, 0.0, 0.0):  # composited here: 1.5.3's backgrounds= shape check rejects [1, 3]
            image = image + (1 - alphas[0].permute(2, 0, 1)) * bg[:, None, None]
        return image, {}

    return Rasterizer(f"gsplat {gsplat.__version__}", run, {"backend": "gsplat"}, has_stages=False)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def timed(fn, device: torch.device):
    """(result, milliseconds) of fn(); on CUDA between events recorded around the call."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)  # earlier work (warm-up) must not overlap this frame
        start.record()
        result = fn()
        end.record()
        torch.cuda.synchronize(device)
        return result, start.elapsed_time(end)
    start = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - start) * 1e3


def summary(values) -> dict:
    return {"median": float(np.median(values)), "p90": float(np.percentile(values, 90))}


def bench_one(r: Rasterizer, cameras, warmup: int, frames: int, device, samples=None) -> dict:
    """Time r on every camera; `samples` (the dict an earlier round returned) gathers rounds."""
    samples = samples or {"e2e": [], "stages": defaultdict(list), "images": []}
    e2e, stages, images = samples["e2e"], samples["stages"], []
    for cam in cameras:
        for _ in range(warmup):
            r.render(cam, False)
        for _ in range(frames):
            (image, stage_ms), ms = timed(lambda: r.render(cam, False), device)
            e2e.append(ms)
            for name, v in stage_ms.items():
                stages[name].append(v)
        # Backends that time stages only on request (cuda) get their own pass, so that
        # stage timing never inflates the end-to-end figures.
        if r.has_stages and not stage_ms:
            for _ in range(frames):
                for name, v in r.render(cam, True)[1].items():
                    stages[name].append(v)
        images.append(image.float().cpu())
    samples["images"] = images
    return samples


def bench_all(rasterizers, cameras, warmup: int, frames: int, device, rounds: int = 1) -> list[dict]:
    """Rounds interleave the rasterizers (A B C, A B C, ...), so that a drift of the GPU's clocks
    during the run spreads over all of them instead of biasing the ratios."""
    samples = [None] * len(rasterizers)
    for _ in range(rounds):
        for i, r in enumerate(rasterizers):
            samples[i] = bench_one(r, cameras, warmup, frames, device, samples[i])
    return [{"name": r.name, "settings": r.settings, "images": s["images"], "frames": len(s["e2e"]),
             "stages": {k: summary(v) for k, v in s["stages"].items()}, "e2e": summary(s["e2e"]),
             "pairs": float(np.mean(r.pairs)) if r.pairs else None}
            for r, s in zip(rasterizers, samples)]


def mean_psnr(images, refs) -> float:
    return float(np.mean([metrics.psnr(a, b).item() for a, b in zip(images, refs)]))


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


def save_images(folder: Path, rows, cameras) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(rows):
        label = "".join(c if c.isalnum() else "_" for c in r["name"])
        for cam, img in zip(cameras, r["images"]):
            pixels = (img.clamp(0, 1).permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}_{label}_{cam.name}.png")


def build_parser() -> argparse.ArgumentParser:
    default_rast = "cuda" if torch.cuda.is_available() else "torch"
    p = argparse.ArgumentParser(prog="python -m gsexp.bench", description=__doc__,
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
                   help=f"comma list of backend[:blend][:key=value]... (default {default_rast})")
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


def main(argv=None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.frames < 1 or args.rounds < 1 or args.warmup < 0 or args.num_cameras < 0:
        parser.error("--frames and --rounds must be >= 1, --warmup and --num-cameras >= 0")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")

    flag, path = ("--ply", args.ply) if args.ply else ("--checkpoint", args.checkpoint)
    try:
        g = load_ply(path) if args.ply else load_checkpoint_gaussians(path)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        parser.error(f"{flag} {path}: cannot read it: {e}")
    g = g.to(device)

    background = (0.0, 0.0, 0.0)
    if args.cameras == "orbit":
        if args.num_cameras < 1:
            parser.error("--num-cameras must be >= 1 for orbit cameras")
        try:
            up = parse_up(args.up)
        except ValueError as e:
            parser.error(f"--up: {e}")
        cameras, camera_info = orbit_cameras(g.means, args.num_cameras, args.width, args.height,
                                             up=up, fov_deg=args.fov)
    else:
        if args.data_kind is None or args.data_path is None:
            parser.error("--cameras test needs --data-kind and --data-path")
        scene = load_scene(args.data_kind, args.data_path)
        cameras = scene.test_cameras
        if args.num_cameras and len(cameras) > args.num_cameras:
            picks = np.linspace(0, len(cameras) - 1, args.num_cameras).round().astype(int)
            cameras = [cameras[i] for i in picks]
        cameras = [c.scaled(args.scale) for c in cameras] if args.scale != 1.0 else cameras
        background = scene.background
        camera_info = {"data_kind": args.data_kind, "data_path": str(args.data_path),
                       "scale": args.scale}
    cameras = [c.to(device) for c in cameras]  # once, outside the timed renders

    rasterizers = []
    for spec in filter(None, (s.strip() for s in args.rasterizers.split(","))):
        try:
            rasterizers.append(gsexp_rasterizer(spec, g, background))
        except ValueError as e:
            parser.error(f"--rasterizers {spec!r}: {e}")
        if rasterizers[-1].settings["backend"] == "cuda" and device.type != "cuda":
            parser.error(f"--rasterizers {spec!r} needs --device cuda")
    if not rasterizers:
        parser.error("--rasterizers: give at least one")
    skipped = []
    if args.no_gsplat:
        skipped.append("gsplat: skipped (--no-gsplat)")
    elif device.type != "cuda":
        skipped.append("gsplat: skipped (needs a CUDA device)")
    else:
        try:
            rasterizers.append(gsplat_rasterizer(g, background))
        except Exception as e:  # not installed, or a broken install: the bench goes on without it
            skipped.append(f"gsplat: skipped ({type(e).__name__}: {e})")

    # One untimed render each: bad settings fail here, naming the spec, before any timing.
    with torch.no_grad():
        for r in rasterizers:
            try:
                r.render(cameras[0], False)
            except (ValueError, TypeError) as e:
                parser.error(f"--rasterizers {r.name!r}: {e}")
        rows = bench_all(rasterizers, cameras, args.warmup, args.frames, device, args.rounds)
    for r in rows:
        r["psnr"] = mean_psnr(r["images"], rows[0]["images"])

    resolution = ", ".join(dict.fromkeys(f"{c.width}x{c.height}" for c in cameras))
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    camera_info = {"kind": args.cameras, "count": len(cameras), "names": [c.name for c in cameras],
                   **camera_info}
    report = {
        "config": {"input": {"kind": flag.lstrip("-"), "path": str(path)}, "num_gaussians": len(g),
                   "sh_degree": g.sh_degree, "cameras": camera_info, "resolution": resolution,
                   "warmup": args.warmup, "frames": args.frames, "rounds": args.rounds, "background": list(background),
                   "device": str(device), "device_name": device_name, "torch": torch.__version__,
                   "argv": list(sys.argv[1:] if argv is None else argv)},
        # PSNR vs the first row: null for the first row itself, "inf" (a string, so the file
        # stays strict JSON) for identical images.
        "rasterizers": [{k: v for k, v in r.items() if k != "images"}
                        | {"psnr": None if i == 0 else ("inf" if math.isinf(r["psnr"]) else r["psnr"])}
                        for i, r in enumerate(rows)],
        "skipped": skipped,
    }
    if args.save_images:
        save_images(args.save_images, rows, cameras)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")

    print(f"{len(g):,} Gaussians (SH degree {g.sh_degree}) from {path}; {len(cameras)} {args.cameras} "
          f"cameras at {resolution}; {args.warmup} warm-up + {args.frames} timed frames per camera; "
          f"{device_name}, torch {torch.__version__}")
    for line in skipped:
        print(line)
    print(table(rows, len(g), resolution))
    return report


if __name__ == "__main__":
    main()
