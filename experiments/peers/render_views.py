"""Render a gsexp model at a list of cameras into lossless 8-bit PNGs (the renders score.py reads).

    python experiments/peers/render_views.py outputs/runs/lego_fast --cameras lego_test.json --out renders/
    python experiments/peers/render_views.py model.ply --cameras c.json --rasterizer tc_gs:intersect=accutile

The rasterizer defaults to the run's own (its .hydra/config.yaml), else vanilla on a GPU and the
torch reference on a CPU. Each view is written as <camera name>.png, quantised as the original
3DGS render script saves it (round to the nearest of 256 levels).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cameras as camera_file  # noqa: E402  (this folder's module)

from gsexp.eval import find_run_config, image_names  # noqa: E402
from gsexp.export import load_model  # noqa: E402
from gsexp.render import render  # noqa: E402


def to_uint8(image: torch.Tensor):
    """[3,H,W] float in [0,1] -> HxWx3 uint8, rounded (torchvision's save_image does the same)."""
    return (image.clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()


def save_png(array, path: Path) -> None:
    from PIL import Image
    Image.fromarray(array).save(path, compress_level=1)


def default_settings(model: Path):
    from gsexp.config import rasterizer_settings
    from gsexp.render.settings import make_settings

    run = find_run_config(model)
    if run is not None and "rasterizer" in run:
        return rasterizer_settings(run)
    return make_settings("vanilla" if torch.cuda.is_available() else "torch")


def render_all(g, cams, settings, background, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    names = image_names(cams)
    with torch.no_grad():
        for cam, name in zip(cams, names):
            image = render(g, cam.to(g.device), settings, background=background).image
            save_png(to_uint8(image), out / name)
    return names


def main(argv=None) -> int:
    from gsexp.bench.rasterizers import parse_rasterizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path, help="a run directory, checkpoint .pt, .ply or .splat")
    p.add_argument("--cameras", type=Path, required=True, help="cameras.py's JSON")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--rasterizer", help="a bench spec, e.g. tc_gs:intersect=accutile (default: the run's)")
    p.add_argument("--background", default="1,1,1", help="r,g,b in [0,1] (NeRF-synthetic: white)")
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = load_model(a.model).to(device)
    settings = parse_rasterizer(a.rasterizer).settings if a.rasterizer else default_settings(a.model)
    background = tuple(float(v) for v in a.background.split(","))
    names = render_all(g, camera_file.load(a.cameras), settings, background, a.out)
    print(f"{a.model}: {len(names)} views with {settings.name} ({', '.join(f'{k}={v}' for k, v in settings.switches().items())}) -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
