"""Evaluate any model on a scene's views: python -m gsexp.eval MODEL [key=value ...]

MODEL: a run directory (its newest checkpoint), a trainer checkpoint (.pt), a PLY (INRIA or
PlayCanvas compressed) or a .splat file.

Keys (Hydra style, as train.py takes them):
  data=<kind>                 the scene loader: conf/data/<kind>.yaml (blender, colmap, llff,
                              synthetic, transforms); data.<key>=v sets one key (data.path=...)
  rasterizer=<variant>        torch | vanilla | gemm_gs | tc_gs (conf/rasterizer/), and
                              rasterizer.<switch>=v (default: the run's, else vanilla with a GPU
                              and torch without)
  out=<dir>                   default: <run dir>/eval (<run dir>/eval_step_N for its checkpoint
                              step_N.pt), else beside the file <stem>_eval/ (a .ply),
                              <stem>_splat_eval/, <stem>_pt_eval/; + _train for split=train
  split=test|train            the views to evaluate (default test)
  lpips=auto|true|false       auto: LPIPS when its weights are found, else null (default)
  lpips_net=vgg|alex          default: the run's, else vgg
  device=auto|cpu|cuda        default auto
  depth=true|false            also write <view>_depth.png: the expected depth, near red to far
                              blue over black (gsexp/depth_colors.py; range per view, in
                              metrics.json's depth_range); default false
A run's own .hydra/config.yaml (found beside the model: the run directory, or the folder of
point_cloud.ply or of checkpoints/) gives the data and rasterizer defaults, so
`python -m gsexp.eval outputs/runs/<run>` needs nothing else.

Writes into `out`: metrics.json (per view and mean: psnr, ssim, lpips or null, render_ms;
psnr is null where the render is bit-identical to the ground truth, i.e. infinite) and per
view <view>.png: ground truth | render | error side by side, 3W x H. The error map is
mean_c |render - gt| times 4, clamped to [0, 1] (full scale: an error of 0.25, 64 of 255
levels), through a black-red-yellow-white ("hot") colour map: black is exact.
render_ms is the render alone (the scene's first view is rendered once untimed first; with
depth=true it includes the depth channel).
A user error (missing file, not a model, bad key) prints one line and exits with 2.
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from gsexp.atomic import atomic_write
from gsexp.comparison import CAPTION, ERROR_GAIN, BackgroundWriter, error_map, save_comparison, save_png  # noqa: F401  (gsexp.eval.error_map)
from gsexp.errors import USER_ERRORS, UserError, one_line
from gsexp.export import check_model_path, load_model
from gsexp.paths import REPO_ROOT

PROG = "python -m gsexp.eval"
CONF = REPO_ROOT / "conf"
OWN_KEYS = {"out": None, "split": "test", "lpips": "auto", "lpips_net": None, "device": "auto", "depth": "false"}
KEYS_HELP = ("data=<kind>, data.<key>=v, rasterizer=<variant>, rasterizer.<switch>=v, out=, split=, "
             "lpips=, lpips_net=, device=, depth=")
BOOLEANS = {"true": True, "false": False}


@dataclass
class Request:
    model: Path
    groups: dict = field(default_factory=dict)   # data / rasterizer -> the config file's name
    dotted: list = field(default_factory=list)   # data.<key>=v, rasterizer.<switch>=v
    own: dict = field(default_factory=lambda: dict(OWN_KEYS))


# ----------------------------------------------------------------------------- arguments

def parse_args(argv: list[str]) -> Request:
    # an existing path is the model even with '=' in it (run folders are named after overrides)
    models = [a for a in argv if "=" not in a or Path(a).exists()]
    if len(models) != 1:
        what = "no model given" if not models else f"{len(models)} models given ({', '.join(models)})"
        raise UserError(f"{what}; usage: {PROG} <run dir | .pt | .ply | .splat> [key=value ...]")
    req = Request(Path(models[0]))
    for arg in (a for a in argv if a not in models):
        key, value = arg.split("=", 1)
        key = key.lstrip("+")
        if key in ("data", "rasterizer"):
            req.groups[key] = value
        elif key.startswith(("data.", "rasterizer.")):
            req.dotted.append(f"{key}={value}")
        elif key in OWN_KEYS:
            req.own[key] = value
        else:
            raise UserError(f"unknown key '{key}' in '{arg}'; {PROG} takes {KEYS_HELP}")
    if req.own["split"] not in ("test", "train"):
        raise UserError(f"split={req.own['split']}: use split=test or split=train")
    lpips = {"auto": "auto", **BOOLEANS}.get(str(req.own["lpips"]).lower())
    if lpips is None:
        raise UserError(f"lpips={req.own['lpips']}: use lpips=auto, true or false")
    depth = BOOLEANS.get(str(req.own["depth"]).lower())
    if depth is None:
        raise UserError(f"depth={req.own['depth']}: use depth=true or depth=false")
    req.own.update(lpips=lpips, depth=depth)
    return req


def find_run_config(model: Path) -> DictConfig | None:
    """The .hydra/config.yaml of the run the model comes from, if any."""
    model = model.resolve()
    for folder in [model] if model.is_dir() else [model.parent, model.parent.parent]:
        path = folder / ".hydra" / "config.yaml"
        if path.is_file():
            return OmegaConf.load(path)
    return None


def group_file(group: str, name: str) -> DictConfig:
    path = CONF / group / f"{name}.yaml"
    if not path.is_file():
        options = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
        raise UserError(f"{group}={name}: no such {group} config in {CONF / group}; choose one of "
                        f"{', '.join(options)}")
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(str(CONF), version_base=None):  # its defaults list too (rasterizer_switches)
        cfg = hydra_compose(f"{group}/{name}")[group]
    OmegaConf.set_struct(cfg, False)  # the user's dotted keys are checked by validate, with its messages
    return cfg


def compose(req: Request) -> DictConfig:
    """The run's data and rasterizer (or the groups named), the overrides applied, validated
    with the trainer's schema (gsexp.config.validate)."""
    from gsexp.config import validate

    run = find_run_config(req.model)
    if "data" in req.groups:
        data = group_file("data", req.groups["data"])
    elif run is not None and "data" in run:
        data = run.data
    else:
        raise UserError(f"no scene to evaluate {req.model} on (no run config beside it); pass "
                        "data=<kind> data.path=<scene folder>, e.g. data=blender "
                        "data.path=../shared/data/nerf_synthetic/lego")
    if "rasterizer" in req.groups:
        rasterizer = group_file("rasterizer", req.groups["rasterizer"])
    elif run is not None and "rasterizer" in run:
        rasterizer = run.rasterizer
    else:
        rasterizer = group_file("rasterizer", "vanilla" if torch.cuda.is_available() else "torch")
    net = req.own["lpips_net"] or (run.get("lpips_net") if run is not None else None) or "vgg"
    cfg = OmegaConf.create({"data": data, "rasterizer": rasterizer, "eval_lpips": req.own["lpips"],
                            "lpips_net": net, "device": req.own["device"]})
    try:
        cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(req.dotted))
    except Exception as err:  # OmegaConf's grammar errors
        raise UserError(f"cannot parse {' '.join(req.dotted)}: {one_line(err)}") from None
    return validate(cfg)


# ----------------------------------------------------------------------------- images

def image_names(cameras, prefix: str = "view") -> list[str]:
    """One file name per view: the camera's name made safe, made unique."""
    names, seen = [], set()
    for i, cam in enumerate(cameras):
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", cam.name or "") or f"{prefix}_{i:03d}"
        if stem in seen:
            stem = f"{stem}_{i:03d}"
        seen.add(stem)
        names.append(f"{stem}.png")
    return names


# ----------------------------------------------------------------------------- evaluation

def evaluate_views(g, cameras, images, settings, background, device, lpips_net, out: Path) -> list[dict]:
    """Render every view; its metrics, render time and comparison PNG (and with settings.depth
    its depth picture, <view>_depth.png, and depth_range)."""
    from gsexp import metrics
    from gsexp.depth_colors import depth_colors, depth_range
    from gsexp.render import render
    from gsexp.train.evaluate import synced_clock

    rows = []
    with torch.no_grad(), BackgroundWriter() as writer:
        render(g, cameras[0], settings, background=background)  # warm-up: builds, caches
        for cam, ref_host, name in zip(cameras, images, image_names(cameras)):
            start = synced_clock(device)
            rendered = render(g, cam, settings, background=background)
            ms = (synced_clock(device) - start) * 1e3
            img, ref = rendered.image.clamp(0, 1), ref_host.to(device)
            rows.append({"view": cam.name or Path(name).stem, "image": name,
                         "psnr": metrics.psnr(img, ref).item(), "ssim": metrics.ssim(img, ref).item(),
                         "lpips": metrics.lpips(img, ref, net=lpips_net).item() if lpips_net else None,
                         "render_ms": ms})
            writer.submit(save_comparison, out / name, ref_host.cpu(), img.cpu())
            if settings.depth:
                span = depth_range(rendered.depth, rendered.alpha)
                rows[-1]["depth_range"] = list(span)
                writer.submit(save_png, out / f"{Path(name).stem}_depth.png",
                              depth_colors(rendered.depth, rendered.alpha, *span))
    return rows


def mean_row(rows: list[dict]) -> dict:
    def mean(key):
        values = [r[key] for r in rows]
        return None if not values or values[0] is None else sum(values) / len(values)
    return {k: mean(k) for k in ("psnr", "ssim", "lpips", "render_ms")}


def finite(value):
    """JSON has no infinity: a non-finite float becomes null (PSNR of an exact render)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def print_table(rows: list[dict], mean: dict, limit: int = 20) -> None:
    """One line per view (the first limit/2 of a longer list), then the mean."""
    def line(r):
        def fmt(v, spec):
            return format(v, spec) if v is not None else "-".rjust(int(spec.split(".")[0]))
        print(f"{r['view']:<{width}}  {fmt(r['psnr'], '7.2f')}  {fmt(r['ssim'], '6.4f')}  "
              f"{fmt(r['lpips'], '6.4f')}  {fmt(r['render_ms'], '8.1f')}")

    width = max([len(r["view"]) for r in rows] + [4])
    print(f"{'view':<{width}}  {'PSNR':>7}  {'SSIM':>6}  {'LPIPS':>6}  {'ms':>8}")
    shown = rows if len(rows) <= limit else rows[:limit // 2]
    for r in shown:
        line(r)
    if len(shown) < len(rows):
        print(f"... {len(rows) - len(shown)} more views in metrics.json")
    line(dict(mean, view="mean"))


# ----------------------------------------------------------------------------- command line

def default_out(model: Path, split: str) -> Path:
    suffix = "" if split == "test" else "_train"
    if model.is_dir():
        return model / f"eval{suffix}"
    if model.suffix.lower() == ".pt" and model.parent.name == "checkpoints":  # a run's checkpoint
        return model.parent.parent / f"eval_{model.stem}{suffix}"
    kind = "" if model.suffix.lower() == ".ply" else "_" + model.suffix.lower().lstrip(".")
    return model.with_name(f"{model.stem}{kind}_eval{suffix}")  # gt.ply, gt.splat: gt_eval, gt_splat_eval


def prepare(req: Request):
    """Everything before rendering; user errors surface here."""
    from gsexp.config import rasterizer_settings
    from gsexp.train.evaluate import lpips_available
    from gsexp.train.setup import load_data, pick_device

    check_model_path(req.model)  # before the config: the likeliest mistake first
    cfg = compose(req)
    settings = rasterizer_settings(cfg).replace(depth=req.own["depth"])
    device = pick_device(cfg.device, settings)
    lpips_net = cfg.lpips_net if lpips_available(cfg) else None
    g = load_model(req.model).to(device)
    split = req.own["split"]
    scene = load_data(cfg, only=split)  # a missing image of the other split does not matter
    cameras, images = getattr(scene, f"{split}_cameras"), getattr(scene, f"{split}_images")
    if not cameras:
        raise UserError(f"data={cfg.data.kind}: the scene has no {split} views; use split=train, or a "
                        "test split (e.g. data.test_every=8)")
    out = Path(req.own["out"]) if req.own["out"] else default_out(req.model, split)
    if out.exists() and not out.is_dir():
        raise UserError(f"out={out} is a file; give a folder")
    out.mkdir(parents=True, exist_ok=True)
    return cfg, settings, device, lpips_net, g, scene, cameras, images, out


def cuda_errors(settings) -> tuple:
    if settings.backend != "cuda":
        return ()
    from gsexp.render.cuda.build import CudaUnavailable
    return (CudaUnavailable,)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    try:
        req = parse_args(argv)
        cfg, settings, device, lpips_net, g, scene, cameras, images, out = prepare(req)
    except USER_ERRORS as err:
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        return 2
    print(f"{req.model}: {len(g):,} Gaussians (SH degree {g.sh_degree}) on {cfg.data.kind} "
          f"{req.own['split']} ({len(cameras)} views), rasterizer={settings.name}, {device}")
    try:
        rows = evaluate_views(g, cameras, images, settings, tuple(scene.background), device, lpips_net, out)
    except cuda_errors(settings) as err:  # e.g. the CUDA extension cannot be built here
        print(f"{PROG}: error: rasterizer={settings.name}: {one_line(err)}", file=sys.stderr)
        return 2
    mean = mean_row(rows)
    result = {"model": str(req.model), "num_gaussians": len(g), "sh_degree": g.sh_degree,
              "split": req.own["split"], "data": OmegaConf.to_container(cfg.data, resolve=True),
              "rasterizer": {"name": settings.name, **settings.switches()}, "device": str(device),
              "lpips_net": lpips_net, "mean": mean, "per_view": rows,
              "images": CAPTION}
    if settings.depth:
        result["depth_images"] = ("<view>_depth.png: expected depth, depth_range[0] red to depth_range[1] blue "
                                  "(2nd and 98th percentiles of the pixels with alpha >= 0.5), times alpha over black")
    with atomic_write(out / "metrics.json") as f:
        f.write(json.dumps(finite(result), indent=2).encode())
    print_table(rows, mean)
    print(f"wrote {out / 'metrics.json'} and {len(rows)} images" + (" and depth pictures" if settings.depth else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
