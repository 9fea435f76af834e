"""The viewer's frame time without a browser: its own render path (Viewer.render_view, stage
timing on as the panel shows it) plus the JPEG encoding of each frame, from its opening view.

    python experiments/viewer/frame_time.py outputs/runs/<lego run> --height 1080 --aspect 1.7778 \
        --variants tc_gs/accutile,tc_gs/aabb,vanilla/aabb --frames 50 --json frame_time.json

A variant is `<panel rasterizer>/<intersect>`. Prints medians per variant: render (to host
memory), frame (render + JPEG), FPS from the frame, and the stages. Sending the frame and the
browser's decoding are not in it.
"""
import argparse
import io
import json
import statistics
import time

from PIL import Image

from gsexp.scene import look_at
from gsexp.scene.camera import Camera
from gsexp.view import cameras as cams
from gsexp.view.server import Viewer
from gsexp.view.source import load_source


def opening_pose(source, aspect: float):
    """The pose and vertical fov the viewer opens on (cameras.start_view)."""
    position, target, up = cams.start_view(source.gaussians, source.train_cameras)
    w2c = look_at(position.tolist(), target.tolist(), up.tolist())
    wxyz, position = cams.pose_of(Camera(w2c, 1.0, 1.0, 0.5, 0.5, 1, 1))
    fov = source.train_cameras[0].fov_y if source.train_cameras else 0.87
    return wxyz, position, fov


def time_variant(viewer, pose, aspect: float, frames: int, warmup: int = 5) -> dict:
    render_ms, frame_ms, stages = [], [], {}
    for i in range(warmup + frames):
        start = time.perf_counter()
        image, stats = viewer.render_view(*pose, aspect)
        if image is None:
            return stats
        Image.fromarray(image).save(io.BytesIO(), format="JPEG", quality=90)
        if i >= warmup:
            frame_ms.append((time.perf_counter() - start) * 1e3)
            render_ms.append(stats["render_ms"])
            for k, v in stats["stage_ms"].items():
                stages.setdefault(k, []).append(v)
    frame = statistics.median(frame_ms)
    return {**{k: stats[k] for k in ("rasterizer", "intersect", "width", "height", "device", "gaussians", "pairs")},
            "render_ms": statistics.median(render_ms), "frame_ms": frame, "fps": 1e3 / frame,
            "stage_ms": {k: statistics.median(v) for k, v in stages.items()}, "frames": frames}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--aspect", type=float, default=16 / 9)
    p.add_argument("--variants", default="tc_gs/accutile")
    p.add_argument("--frames", type=int, default=50)
    p.add_argument("--json")
    args = p.parse_args()
    source = load_source(args.model)
    viewer = Viewer(source, port=0, height=args.height, verbose=False)
    pose, results = opening_pose(source, args.aspect), []
    for variant in args.variants.split(","):
        spec, intersect = variant.split("/")
        viewer.controls.rasterizer.value, viewer.controls.intersect.value = spec, intersect
        result = time_variant(viewer, pose, args.aspect, args.frames)
        results.append(result)
        if "error" in result:
            print(f"{variant}: {result['error']}")
            continue
        stages = " ".join(f"{k} {v:.3f}" for k, v in result["stage_ms"].items())
        print(f"{variant:<24} {result['width']}x{result['height']}  render {result['render_ms']:.2f} ms  "
              f"frame {result['frame_ms']:.2f} ms ({result['fps']:.0f} FPS)  stages: {stages}  "
              f"{result['gaussians']:,} Gaussians, {result['pairs']:,} pairs")
    viewer.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
