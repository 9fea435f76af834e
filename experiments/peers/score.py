"""Score a folder of 8-bit renders against a scene's test images: the NeRF-synthetic protocol.

    python experiments/peers/score.py renders/ blender ../shared/data/nerf_synthetic/lego --out score.json
    python experiments/peers/score.py renders_root/ blender <lego> --each scores/   # every folder, one load

The protocol of the original 3DGS metrics script, which reads 8-bit images from disk:
- every test view (lego: all 200), each render a lossless 8-bit image named as render_views.py
  names it (the camera's name; .png or .webp);
- ground truth: NeRF-synthetic's RGBA test image composited on the background (white) in
  float64 and cut to 8 bits, as 3DGS's loader does it (truncation; gsexp's float32 composite
  would differ by one level in ~0.4 % of edge pixels); other kinds: the loader's image rounded
  to 8 bits (exact for 8-bit photos at their stored size);
- PSNR, SSIM (gsexp.metrics: 11x11 Gaussian window, sigma 1.5) and LPIPS v0.1 on VGG and on
  AlexNet, per view, then averaged over the views.
gsexp and every peer are scored by this one script, against the same files.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cameras import parse_option  # noqa: E402

from gsexp import metrics  # noqa: E402
from gsexp.eval import image_names  # noqa: E402
from gsexp.scene import load_scene  # noqa: E402

NETS = ("vgg", "alex")
PROTOCOL = ("8-bit renders against 8-bit ground truth (composited on the background, truncated), "
            "PSNR/SSIM/LPIPS-VGG/LPIPS-Alex averaged over every view")


def blender_ground_truth(path: Path, background, stride: int = 1) -> list[torch.Tensor]:
    """transforms_test.json's images as 3DGS's loader makes them: the composite in float64,
    truncated to 8 bits."""
    meta = json.loads((path / "transforms_test.json").read_text())
    out = []
    for frame in meta["frames"][::stride]:
        file = path / frame["file_path"]
        file = file if file.suffix else file.with_name(file.name + ".png")
        with Image.open(file) as im:
            rgba = np.asarray(im.convert("RGBA"), dtype=np.float64) / 255.0
        rgb = rgba[..., :3] * rgba[..., 3:] + np.asarray(background) * (1.0 - rgba[..., 3:])
        out.append(torch.from_numpy((rgb * 255.0).astype(np.uint8)).permute(2, 0, 1))
    return out


def ground_truth(kind: str, path, scene, options: dict) -> list[torch.Tensor]:
    """The test views' ground truth as uint8 [3,H,W], in the loader's order."""
    if kind == "blender" and options.get("downscale", 1) == 1:
        return blender_ground_truth(Path(path), scene.background, options.get("test_stride", 1))
    return [(im.clamp(0, 1) * 255.0).round().to(torch.uint8) for im in scene.test_images]


def read_render(folder: Path, name: str) -> torch.Tensor:
    stem = Path(name).stem
    for suffix in (".png", ".webp"):
        path = folder / (stem + suffix)
        if path.is_file():
            with Image.open(path) as im:
                if im.mode != "RGB":
                    raise ValueError(f"{path}: expected an 8-bit RGB image, got mode {im.mode}")
                return torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1)
    raise FileNotFoundError(f"no render {stem}.png or {stem}.webp in {folder}")


def score(renders: Path, scene, truth: list[torch.Tensor], device="cpu", nets=NETS) -> dict:
    names = image_names(scene.test_cameras)
    rows = []
    for name, ref in zip(names, truth):
        img = read_render(renders, name).to(device)
        ref = ref.to(device, torch.float32) / 255.0
        if img.shape != ref.shape:
            raise ValueError(f"{name}: render {tuple(img.shape)} but ground truth {tuple(ref.shape)}")
        with torch.no_grad():
            row = {"view": Path(name).stem, "psnr": metrics.psnr(img, ref).item(),
                   "ssim": metrics.ssim(img, ref).item()}
            row |= {f"lpips_{net}": metrics.lpips(img, ref, net=net).item() for net in nets}
        rows.append(row)
    keys = [k for k in rows[0] if k != "view"]
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in keys}
    return {"protocol": PROTOCOL, "scene": scene.name, "views": len(rows), "mean": mean, "per_view": rows}


def row(label, result: dict, nets) -> str:
    m = result["mean"]
    return (f"| {label} | {result['views']} | {m['psnr']:.2f} | {m['ssim']:.4f} | "
            + " | ".join(f"{net} {m[f'lpips_{net}']:.4f}" for net in nets) + " |")


def score_each(root: Path, out_dir: Path, scene, truth, device, nets) -> int:
    """Every render folder under root not yet scored into out_dir/<name>.json, the scene and its
    ground truth loaded once (a call per folder took ~30 s on an H100 machine; loading lego alone
    takes 28 s on the 2-core dev machine). A folder that fails is reported and the rest still
    scored; 1 if any failed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for folder in sorted(d for d in root.iterdir() if d.is_dir()):
        out = out_dir / f"{folder.name}.json"
        if out.exists():
            continue
        try:
            result = score(folder, scene, truth, device, nets)
        except (OSError, ValueError) as e:
            print(f"score.py: {folder.name}: {e}", file=sys.stderr)
            failed = 1
            continue
        result["renders"], result["label"] = str(folder), folder.name
        out.write_text(json.dumps(result, indent=1))
        print(row(folder.name, result, nets), flush=True)
    return failed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("renders", type=Path, help="a folder of renders (with --each: a folder of such folders)")
    p.add_argument("kind", help="the scene loader (blender, colmap, llff, ...)")
    p.add_argument("path")
    p.add_argument("--option", action="append", default=[], help="a loader option, key=value (repeatable)")
    p.add_argument("--out", type=Path, help="write the scores as JSON here")
    p.add_argument("--label", default="", help="a name for the row printed last")
    p.add_argument("--nets", default=",".join(NETS),
                   help="LPIPS backbones, comma-separated (a GPU call may carry one's weights)")
    p.add_argument("--each", type=Path, metavar="OUT_DIR",
                   help="score every folder under renders into OUT_DIR/<folder>.json, skipping those there")
    a = p.parse_args(argv)
    if a.each and (a.out or a.label):
        p.error("--each writes OUT_DIR/<folder>.json, labelled by the folder: drop --out and --label")
    if not a.renders.is_dir():
        p.error(f"{a.renders}: no such folder of renders")
    nets = tuple(n for n in a.nets.split(",") if n)
    if unknown := set(nets) - set(NETS):  # before the scene's load (~28 s for lego)
        p.error(f"--nets: unknown backbone(s) {sorted(unknown)}; choose from {', '.join(NETS)}")
    options = dict(parse_option(o) for o in a.option)
    scene = load_scene(a.kind, a.path, **options)
    truth = ground_truth(a.kind, a.path, scene, options)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.each:
        return score_each(a.renders, a.each, scene, truth, device, nets)
    result = score(a.renders, scene, truth, device, nets)
    result["renders"], result["label"] = str(a.renders), a.label
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))
    print(row(a.label or a.renders, result, nets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
