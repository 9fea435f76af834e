"""The gsplat training peer: gsplat's own examples/simple_trainer.py semantics (gsplat main at
90d7b4b3, or the installed 1.5.3 where the API differs) on a scene exactly as gsexp loads it,
with gsexp's initial Gaussians. Writes a JSON record, the test views as 8-bit PNGs and
optionally the model as an INRIA PLY. experiments/peers/TRAINING.md says what is replicated.

    python experiments/peers/train_gsplat.py --experiment lego_fast --out run.json --renders renders/
    python experiments/peers/train_gsplat.py --data colmap --path <scene> --out run.json --renders renders/

It refuses (exit 2) to run a slower SSIM than fused_ssim's CUDA kernel unless --allow-slow-ssim.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for path in (str(REPO), str(HERE)):  # gsexp and the helpers beside this file, from any cwd
    if path not in sys.path:
        sys.path.insert(0, path)

from gsexp.atomic import atomic_write  # noqa: E402
from gsexp.errors import USER_ERRORS, UserError, one_line  # noqa: E402
from gsplat_api import PostBackward, count_fused_calls, make_loss, optional_module, slow_ssim_reasons, versions  # noqa: E402
import cameras as camera_file  # noqa: E402
import gsplat_trainer as trainer  # noqa: E402

PROG = "train_gsplat.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as every other bad input
        raise UserError(message)


def parse_args(argv):
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    data = p.add_argument_group("scene and initial Gaussians, through gsexp's config (conf/)")
    data.add_argument("--experiment", help="a gsexp experiment whose data and model the run takes (e.g. lego_fast: "
                                           "lego and its 100K random init)")
    data.add_argument("--data", help="gsexp data kind: blender, colmap, llff, transforms, synthetic")
    data.add_argument("--path", help="the scene folder (data.path)")
    data.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE",
                      help="a gsexp data key, e.g. downscale=2 (repeatable)")
    data.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                      help="a gsexp model key, e.g. num_random=100000 (repeatable)")
    data.add_argument("--seed", type=int, default=0, help="gsexp's seed: the random init (default 0, as gsexp)")
    run = p.add_argument_group("training")
    run.add_argument("--iters", type=int, default=30_000)
    run.add_argument("--strategy-option", action="append", default=[], metavar="KEY=VALUE",
                     help="a DefaultStrategy field (default: none, the strategy as shipped)")
    run.add_argument("--sh-degree-interval", type=int, default=1000)
    run.add_argument("--no-fused-adam", action="store_true", help="torch's unfused Adam (1.5.3's trainer)")
    run.add_argument("--train-seed", type=int, default=42, help="set_random_seed(42) of simple_trainer")
    run.add_argument("--log-every", type=int, default=1000, help="read the loss back every N steps")
    run.add_argument("--count-at", default="7000,15000", help="steps after which to record the Gaussian count")
    run.add_argument("--allow-slow-ssim", action="store_true", help="run even if the loss would not use "
                                                                    "fused_ssim's CUDA kernel (recorded)")
    run.add_argument("--device", default="cuda", help="cuda; cpu only with a stand-in rasterizer (the tests)")
    out = p.add_argument_group("outputs")
    out.add_argument("--out", required=True, help="the JSON record")
    out.add_argument("--renders", required=True, help="folder for <test view name>.png")
    out.add_argument("--cameras", help="render these cameras (experiments/peers/cameras.py's JSON, e.g. lego's 200 "
                     "test views where only every 8th test image travels) instead of the scene's test split")
    out.add_argument("--save-ply", help="write the trained model here (INRIA PLY)")
    a = p.parse_args(argv)
    if a.iters < 1 or a.sh_degree_interval < 1 or a.log_every < 1:
        raise UserError("--iters, --sh-degree-interval and --log-every must be positive")
    if not (a.experiment or (a.data and a.path) or a.data == "synthetic"):
        raise UserError("no scene: pass --data KIND --path DIR (e.g. --data colmap --path scenes/beer) "
                        "or --experiment NAME (e.g. lego_fast)")
    renders = Path(a.renders)
    if renders.exists() and (not renders.is_dir() or any(renders.iterdir())):
        raise UserError(f"--renders {renders}: exists and is not an empty folder; the scorer reads every PNG "
                        "there, so give a new or empty one")
    try:
        a.count_at = tuple(int(s) for s in a.count_at.split(",") if s)
    except ValueError:
        raise UserError(f"--count-at {a.count_at!r}: give step numbers separated by commas") from None
    return a


def key_values(items, flag) -> dict:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"{flag} {item!r}: expected KEY=VALUE")
        pairs[key] = value
    return pairs


def gsexp_config(a):
    """gsexp's composed train config (data, model, seed) for the arguments: the same composition
    as `python train.py`, so the scene and the init are those of gsexp's own run."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    overrides = [f"experiment={a.experiment}"] if a.experiment else []
    overrides += [f"data={a.data}"] if a.data else []
    overrides += [f"data.path={a.path}"] if a.path else []
    overrides += [f"data.{k}={v}" for k, v in key_values(a.data_option, "--data-option").items()]
    overrides += [f"model.{k}={v}" for k, v in key_values(a.model_option, "--model-option").items()]
    overrides.append(f"seed={a.seed}")
    try:
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
            return compose("train", overrides=overrides)
    except HydraException as err:
        raise UserError(f"gsexp config ({' '.join(overrides)}): "
                        f"{one_line(str(err).split('Config search path')[0])}") from None


def make_strategy(gsplat, options: dict):
    """DefaultStrategy as simple_trainer constructs it (field(default_factory=DefaultStrategy), st:179),
    with --strategy-option fields typed as their defaults."""
    fields = {f.name: f for f in dataclasses.fields(gsplat.strategy.DefaultStrategy)}
    typed = {}
    for key, value in options.items():
        if key not in fields:
            raise UserError(f"--strategy-option {key}: DefaultStrategy has no such field; it has {', '.join(fields)}")
        kind = type(fields[key].default)
        typed[key] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
    return gsplat.strategy.DefaultStrategy(**typed)


def set_random_seed(seed: int):  # simple_trainer's set_random_seed (examples/utils.py), seed 42 (st:387)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def load(cfg):
    """gsexp's data loading and initial Gaussians (gsexp/train/setup.py), seeded as its trainer."""
    from gsexp.train.setup import initial_gaussians, load_data, seed_everything

    seed_everything(cfg.seed)
    scene = load_data(cfg)
    return scene, initial_gaussians(cfg, scene)


def refuse_slow_ssim(reasons, a):
    if reasons and not a.allow_slow_ssim:
        raise UserError(f"the loss would not run fused_ssim's CUDA kernel: {'; '.join(reasons)}; "
                        "pass --allow-slow-ssim to run anyway (recorded)")


def run(a, rasterize=None) -> dict:
    gsplat = optional_module("gsplat")
    if gsplat is None:
        raise UserError("gsplat is not importable: pip install gsplat==1.5.3, or build gsplat main (see TRAINING.md)")
    if rasterize is None and torch.device(a.device).type != "cuda":
        raise UserError(f"--device {a.device}: gsplat's rasterization needs CUDA (cpu is for the tests' stand-in)")
    if torch.device(a.device).type == "cuda" and not torch.cuda.is_available():
        raise UserError("no CUDA device is available; gsplat's rasterization needs one")
    fused, losses = optional_module("fused_ssim"), optional_module("gsplat.losses")
    refuse_slow_ssim(slow_ssim_reasons(fused is not None, a.device, None, 0), a)  # before loading anything

    cfg = gsexp_config(a)
    strategy = make_strategy(gsplat, key_values(a.strategy_option, "--strategy-option"))
    scene, gaussians = load(cfg)
    set_random_seed(a.train_seed)
    opts = trainer.TrainerOptions(iterations=a.iters, sh_degree=gaussians.sh_degree,
                                  sh_degree_interval=a.sh_degree_interval, fused_adam=not a.no_fused_adam,
                                  log_every=a.log_every, count_at=a.count_at)
    scene_scale = scene.extent  # st:458: the Parser's max camera distance from their mean x 1.1, as gsexp's extent
    splats = trainer.splats_of(gaussians, a.device)
    optimizers = trainer.make_optimizers(splats, scene_scale, opts)
    strategy.check_sanity(splats, optimizers)  # st:508-513
    state = strategy.initialize_state(scene_scale=scene_scale)
    loss, ssim_source = make_loss(opts.ssim_lambda, losses, fused)
    # Composited in gsplat's kernel (backgrounds=), [C, 3]: unpacked, the image dims are [C] in both
    # versions (1.5.3's packed mode would want [3]; gsplat's tests pass [C, channels] unpacked).
    black = all(c == 0 for c in scene.background)
    background = None if black else torch.tensor([scene.background], dtype=torch.float32, device=a.device)
    post_backward = PostBackward(strategy)
    post_backward.attach(splats)
    peer = trainer.Peer(rasterize or gsplat.rasterization, strategy, post_backward, loss, opts, background)
    train_views = trainer.views_of(scene.train_cameras, scene.train_images, a.device)

    with count_fused_calls(fused) as calls:
        warmup_s, warmup_steps = trainer.warm_up(peer, splats, scene_scale,
                                                 lambda: strategy.initialize_state(scene_scale=scene_scale),
                                                 train_views[0])
    reasons = slow_ssim_reasons(fused is not None, a.device, calls[0], warmup_steps)
    refuse_slow_ssim(reasons, a)

    cuda = torch.device(a.device).type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    result = trainer.train(peer, splats, optimizers, state, train_views, scene_scale)
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    test_cameras, test_images = scene.test_cameras, scene.test_images
    if a.cameras:  # no images beside them: the scorer compares, here only the renders are written
        test_cameras, test_images = camera_file.load(a.cameras), None
    test_views = trainer.views_of(test_cameras, None, a.device)
    renders = trainer.save_renders(peer, splats, test_views, test_images, Path(a.renders))
    if a.save_ply:
        save_model(splats, gaussians.sh_degree, Path(a.save_ply))

    return {
        "trainer": f"gsplat {gsplat.__version__}, examples/simple_trainer.py semantics (gsplat main 90d7b4b3)",
        "versions": versions(gsplat, fused, a.device, REPO),
        "ssim": {"source": ssim_source, "fused_ssim_importable": fused is not None, "device": a.device,
                 "fused_ssim_calls_in_warmup": calls[0], "warmup_loss_calls": warmup_steps, "fast": not reasons,
                 "slow_reasons": reasons, "allow_slow_ssim": a.allow_slow_ssim},
        "options": {"cli": dict(vars(a)), "trainer": dataclasses.asdict(opts),
                    "strategy": dataclasses.asdict(strategy), "strategy_post_backward_scene":
                    post_backward.scene_class is not None, "packed": False, "absgrad": strategy.absgrad,
                    "rasterize_mode": opts.rasterize_mode, "learning_rates": opts.learning_rates(scene_scale),
                    "adam": {"eps": optimizers["means"].defaults["eps"], "betas": optimizers["means"].defaults["betas"],
                             "fused": opts.fused_adam}},
        "scene": {"kind": cfg.data.kind, "path": str(cfg.data.path), "data": _plain(cfg.data),
                  "train_views": len(train_views), "test_views": len(test_views), "scene_scale": scene_scale,
                  "background": list(scene.background)},
        "init": {"model": _plain(cfg.model), "seed": cfg.seed, "gaussians": len(gaussians),
                 "scene_points": 0 if scene.points is None else len(scene.points)},
        "iterations": a.iters, "warmup_seconds": warmup_s, **result, "peak_gpu_memory_gib": peak,
        "num_gaussians": len(splats["means"]), "renders": renders, "ply": a.save_ply,
    }


def _plain(node):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True)


def save_model(splats, sh_degree: int, path: Path):
    from gsexp.gaussians import Gaussians, save_ply

    s = {k: v.detach() for k, v in splats.items()}
    save_ply(Gaussians(s["means"], s["scales"], s["quats"], s["opacities"], torch.cat([s["sh0"], s["shN"]], 1),
                       sh_degree), path)


def main(argv=None, rasterize=None) -> int:
    """rasterize: a stand-in for gsplat.rasterization (the CPU test's); None: gsplat's."""
    try:
        a = parse_args(argv)
        record = run(a, rasterize)
    except USER_ERRORS as err:
        print(f"{PROG}: {one_line(err)}", file=sys.stderr)
        return 2
    out = Path(a.out)
    with atomic_write(out) as f:
        f.write(json.dumps(record, indent=1).encode())
    quick = record["renders"]["quick_psnr"]
    quality = f"quick PSNR {quick['mean']:.2f} dB" if quick else "renders only (score.py scores them)"
    print(f"{record['trainer']}: {a.iters} steps in {record['train_seconds']:.1f} s, "
          f"{record['init']['gaussians']:,} -> {record['num_gaussians']:,} Gaussians, {quality} "
          f"({record['renders']['count']} views) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
