"""A fly-through video of a model: python -m gsexp.video MODEL --path orbit|test --out FILE.mp4

MODEL: a run directory (its newest checkpoint), a trainer checkpoint (.pt), a PLY or a .splat.
  --path orbit   a circle around the Gaussians' median centre, 20 degrees above the horizon,
                 far enough that 90 % of the centres fit the view (gsexp/bench/cameras.py);
                 up is the training cameras' mean up when the run's scene is known, else --up
  --path test    through the scene's test cameras in order (a run directory, or a model beside
                 its run's .hydra/), the pose interpolated between them
  --frames N     frames (default 120); --fps (default 30); --width/--height (default: the test
                 cameras' size, else 640x480; rounded down to even numbers for H.264)
  --rasterizer   a spec as the bench takes it (torch, tc_gs:intersect=accutile, ...); default
                 tc_gs on a GPU, else the torch reference
  --channel      rgb (default) or depth: the expected depth, near red to far blue over black
                 (gsexp/depth_colors.py), one range for the whole video: --depth-range NEAR FAR,
                 else the first frame's (printed)
H.264 (yuv420p) through PyAV, whose wheel ships the encoder. A progress bar on a terminal.
A user error (missing file, not a model, no test cameras) prints one line and exits with 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

PROG = "python -m gsexp.video"


def even(n: int) -> int:
    return max(2, int(n) // 2 * 2)


def orbit_path(source, frames: int, width: int, height: int, up: str | None):
    from gsexp.bench.cameras import orbit_cameras, parse_up
    from gsexp.view.cameras import world_up

    if up:
        axis = parse_up(up)
    else:  # world_up: the cameras' mean up, z without cameras
        axis = torch.from_numpy(world_up(source.train_cameras)).double()
    cameras, _ = orbit_cameras(source.gaussians.means, frames, width, height, up=axis)
    return cameras


def test_path(source, frames: int, width: int, height: int):
    """`frames` poses along the test cameras: positions interpolated linearly, rotations by
    normalised quaternion interpolation (the views are close, so nlerp is as good as slerp)."""
    from gsexp.view.cameras import camera_from_pose, pose_of

    views = source.test_cameras
    if len(views) < 2:
        from gsexp.errors import UserError
        raise UserError(f"--path test: {source.name} has {len(views)} test camera(s) (the run's scene is needed, "
                        "with two or more test views); use --path orbit")
    poses = [pose_of(c) for c in views]
    fov, cameras = views[0].fov_y, []
    for t in np.linspace(0, len(views) - 1, frames):
        i = min(int(t), len(views) - 2)
        f = t - i
        (qa, pa), (qb, pb) = poses[i], poses[i + 1]
        qb = qb if np.dot(qa, qb) >= 0 else -qb  # the short way round
        q = (1 - f) * qa + f * qb
        cameras.append(camera_from_pose(q / np.linalg.norm(q), (1 - f) * pa + f * pb, fov, width, height))
    return cameras


def write_video(frames, out: Path, fps: int, total: int) -> int:
    """Encode the [H, W, 3] uint8 frames as H.264 into `out`; returns the number written."""
    import av
    from tqdm import tqdm

    count = 0
    with av.open(str(out), mode="w") as container:
        stream = None
        for image in tqdm(frames, total=total, desc=f"{out.name}", unit="frame", disable=None):
            if stream is None:
                stream = container.add_stream("libx264", rate=fps)
                stream.height, stream.width = image.shape[:2]
                stream.pix_fmt = "yuv420p"
                stream.options = {"crf": "18"}
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
            count += 1
        if stream is not None:
            for packet in stream.encode():  # flush the encoder
                container.mux(packet)
    return count


def rendered(source, cameras, settings, device, depth_range: list | None = None):
    """The frames as [H, W, 3] uint8; with settings.depth, the depth pictures, all in one range:
    `depth_range` (filled with the first frame's when empty)."""
    from gsexp.comparison import to_uint8
    from gsexp.depth_colors import depth_colors, depth_range as range_of
    from gsexp.render import render

    g = source.gaussians.to(device)
    with torch.no_grad():
        for cam in cameras:
            out = render(g, cam.to(device), settings, background=source.background)
            if not settings.depth:
                yield to_uint8(out.image)
                continue
            if not depth_range:
                depth_range[:] = range_of(out.depth, out.alpha)
            yield to_uint8(depth_colors(out.depth, out.alpha, *depth_range))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path, help="run directory, checkpoint .pt, .ply or .splat")
    p.add_argument("--path", choices=("orbit", "test"), default="orbit")
    p.add_argument("--out", type=Path, required=True, help="the .mp4 to write")
    p.add_argument("--frames", type=int, default=120)
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--up", help="orbit axis: x, -y, +z or 'x,y,z' (default: the training cameras' up, else z)")
    p.add_argument("--rasterizer", help="a bench spec (default tc_gs on a GPU, else torch)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--channel", default="rgb", choices=("rgb", "depth"))
    p.add_argument("--depth-range", nargs=2, type=float, metavar=("NEAR", "FAR"),
                   help="--channel depth: the depths drawn red and blue (default: the first frame's)")
    return p


def main(argv=None) -> int:
    from gsexp.bench.rasterizers import parse_rasterizer
    from gsexp.cli import join_up_value
    from gsexp.errors import USER_ERRORS, UserError, one_line
    from gsexp.train.setup import pick_device
    from gsexp.view.source import load_source

    args = build_parser().parse_args(join_up_value(argv))
    try:
        if args.frames < 1 or args.fps < 1:
            raise UserError(f"--frames {args.frames} --fps {args.fps}: both must be >= 1")
        if args.depth_range and (args.channel != "depth" or not args.depth_range[1] > args.depth_range[0]):
            raise UserError(f"--depth-range {args.depth_range[0]:g} {args.depth_range[1]:g}: it goes with "
                            "--channel depth, and FAR must be greater than NEAR")
        device = pick_device(args.device)
        spec = args.rasterizer or ("tc_gs" if device.type == "cuda" else "torch")
        settings = parse_rasterizer(spec).settings
        if settings is None:
            raise UserError(f"--rasterizer {spec}: the video renders with gsexp's own rasterizers")
        settings = settings.replace(depth=args.channel == "depth")
        if settings.backend == "cuda" and device.type != "cuda":
            raise UserError(f"--rasterizer {spec} runs on a GPU and the video renders on {device}; "
                            "use --rasterizer torch (or --device cuda on a GPU machine)")
        source = load_source(args.model, with_scene=True)
        size = source.test_cameras[0] if source.test_cameras else None
        width = even(args.width or (size.width if size else 640))
        height = even(args.height or (size.height if size else 480))
        cameras = orbit_path(source, args.frames, width, height, args.up) if args.path == "orbit" \
            else test_path(source, args.frames, width, height)
        args.out.parent.mkdir(parents=True, exist_ok=True)
    except USER_ERRORS as err:
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        return 2
    depth_range = list(args.depth_range or [])
    count = write_video(rendered(source, cameras, settings, device, depth_range), args.out, args.fps, len(cameras))
    channel = f"depth {depth_range[0]:.4g} (red) to {depth_range[1]:.4g} (blue)" if settings.depth else "rgb"
    print(f"wrote {args.out}: {count} frames, {width}x{height}, {args.fps} fps, {args.path} path, "
          f"rasterizer {spec}, {len(source.gaussians):,} Gaussians, {channel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
