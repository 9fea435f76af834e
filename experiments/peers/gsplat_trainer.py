"""gsplat's examples/simple_trainer.py training loop (gsplat main at 90d7b4b3), written for the
peer harness (train_gsplat.py). The rasterizer, the strategy and the loss come in as arguments,
so tests/test_peer_harness.py runs this very loop on the CPU with a stand-in rasterizer.

"st:N" below is a line of examples/simple_trainer.py at 90d7b4b3
(`git -C <gsplat> show 90d7b4b3:examples/simple_trainer.py`); "st-1.5.3:N" the same file at v1.5.3.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image


@dataclass(frozen=True)
class TrainerOptions:
    """simple_trainer's Config defaults that the run depends on (all of them listed in TRAINING.md)."""
    iterations: int = 30_000          # max_steps (st:141)
    sh_degree: int = 3                # st:160
    sh_degree_interval: int = 1000    # one more band every N steps (st:165, schedule st:906)
    ssim_lambda: float = 0.2          # st:171
    near_plane: float = 0.01          # st:174
    far_plane: float = 1e10           # st:176
    antialiased: bool = False         # st:189 -> rasterize_mode "classic" (st:692)
    batch_size: int = 1               # st:136; scales lr, eps and betas (st:360-373)
    means_lr: float = 1.6e-4          # st:195, times scene_scale (st:336)
    scales_lr: float = 5e-3           # st:197
    opacities_lr: float = 5e-2        # st:199
    quats_lr: float = 1e-3            # st:201
    sh0_lr: float = 2.5e-3            # st:203
    shN_lr: float = 2.5e-3 / 20       # st:205
    fused_adam: bool = True           # torch.optim.Adam(..., fused=True) (st:374; 1.5.3's trainer: unfused)
    means_lr_final: float = 0.01      # ExponentialLR to 0.01x over the run (st:811-813)
    log_every: int = 1000             # loss read back (a sync) every N steps, for the record only
    count_at: tuple = (7000, 15000)   # Gaussians and seconds recorded after these steps (and at the end)

    @property
    def rasterize_mode(self) -> str:
        return "antialiased" if self.antialiased else "classic"

    def learning_rates(self, scene_scale: float) -> dict:
        return {"means": self.means_lr * scene_scale, "scales": self.scales_lr, "quats": self.quats_lr,
                "opacities": self.opacities_lr, "sh0": self.sh0_lr, "shN": self.shN_lr}


@dataclass
class View:
    """A camera as gsplat takes it, and its image [1,H,W,3] on the device (None: not loaded)."""
    viewmat: torch.Tensor  # [1,4,4] world-to-camera
    K: torch.Tensor        # [1,3,3], pixel centres at +0.5 (COLMAP, as gsexp's cameras and gsplat)
    width: int
    height: int
    pixels: torch.Tensor | None
    name: str


def views_of(cameras, images, device) -> list[View]:
    """gsexp cameras and [3,H,W] images as gsplat's per-view tensors, on the device once (gsexp's
    trainer keeps them there too; simple_trainer moves each batch there from a DataLoader)."""
    from gsexp.bench.peers import gsplat_matrices  # the render bench's: the same cameras for gsplat

    out = []
    for i, cam in enumerate(cameras):
        pixels = None if images is None else images[i].permute(1, 2, 0)[None].contiguous().to(device)
        out.append(View(*gsplat_matrices(cam, device), cam.width, cam.height, pixels, cam.name))
    return out


def splats_of(gaussians, device) -> torch.nn.ParameterDict:
    """gsexp Gaussians as simple_trainer's splats (names and order of st:334-347)."""
    g = gaussians.to(device)
    tensors = {"means": g.means, "scales": g.log_scales, "quats": g.quats, "opacities": g.opacity_logits,
               "sh0": g.sh[:, :1], "shN": g.sh[:, 1:]}
    return torch.nn.ParameterDict({k: torch.nn.Parameter(v.detach().clone().contiguous()) for k, v in tensors.items()})


def make_optimizers(splats, scene_scale: float, opts: TrainerOptions) -> dict:
    """One Adam per parameter group, as create_splats_with_optimizers (st:360-377)."""
    bs = opts.batch_size
    return {name: torch.optim.Adam([{"params": splats[name], "lr": lr * math.sqrt(bs), "name": name}],
                                   eps=1e-15 / math.sqrt(bs), betas=(1 - bs * (1 - 0.9), 1 - bs * (1 - 0.999)),
                                   fused=opts.fused_adam)
            for name, lr in opts.learning_rates(scene_scale).items()}


@dataclass
class Peer:
    """What one training step needs: gsplat's rasterization (or a stand-in), the strategy with its
    post-backward call adapted to the installed gsplat, and the loss."""
    rasterize: object
    strategy: object
    post_backward: object   # (params, optimizers, state, step, info) -> None
    loss: object            # (colors [1,H,W,3], pixels [1,H,W,3]) -> scalar
    opts: TrainerOptions
    background: torch.Tensor | None = None  # [1,3]; None: black, as simple_trainer (no backgrounds)


def render(peer: Peer, splats, view: View, sh_degree: int):
    """rasterize_splats (st:650-794) with the Config defaults: packed=False, absgrad from the
    strategy, classic mode, pinhole, no UT."""
    colors = torch.cat([splats["sh0"], splats["shN"]], 1)  # st:689
    return peer.rasterize(
        means=splats["means"], quats=splats["quats"], scales=torch.exp(splats["scales"]),
        opacities=torch.sigmoid(splats["opacities"]), colors=colors, viewmats=view.viewmat, Ks=view.K,
        width=view.width, height=view.height, sh_degree=sh_degree, near_plane=peer.opts.near_plane,
        far_plane=peer.opts.far_plane, packed=False, absgrad=getattr(peer.strategy, "absgrad", False),
        sparse_grad=False, rasterize_mode=peer.opts.rasterize_mode, backgrounds=peer.background)


def step(peer: Peer, splats, optimizers, schedulers, state, step_i: int, view: View):
    """One step of simple_trainer's loop (st:906-1177), in its order: forward, pre-backward, loss,
    backward, optimizers and schedulers, then the strategy's post-backward."""
    sh_degree = min(step_i // peer.opts.sh_degree_interval, peer.opts.sh_degree)  # st:906
    colors, _, info = render(peer, splats, view, sh_degree)
    peer.strategy.step_pre_backward(splats, optimizers, state, step_i, info)  # st:939
    loss = peer.loss(colors, view.pixels)  # st:955-961
    loss.backward()
    for optimizer in optimizers.values():  # st:1133-1138
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    for scheduler in schedulers:  # st:1149
        scheduler.step()
    peer.post_backward(splats, optimizers, state, step_i, info)  # st:1156
    return loss, sh_degree


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def warm_up(peer: Peer, splats, scene_scale: float, initial_state, view: View) -> tuple[float, int]:
    """Steps on a copy of the model, at SH degree 0 and at the top degree, so that compiling and
    loading kernels (gsplat 1.5.3 compiles its CUDA on first use) stay out of train_seconds.
    Returns the seconds and the number of steps."""
    device = splats["means"].device
    sync(device)
    start = time.perf_counter()
    copy = torch.nn.ParameterDict({k: torch.nn.Parameter(v.detach().clone()) for k, v in splats.items()})
    optimizers = make_optimizers(copy, scene_scale, peer.opts)
    state = initial_state()
    degrees = (0, peer.opts.sh_degree)
    for degree in degrees:
        step(peer, copy, optimizers, [], state, degree * peer.opts.sh_degree_interval, view)
    sync(device)
    return time.perf_counter() - start, len(degrees)


def opacity_was_reset(strategy, splats, step_i: int) -> bool | None:
    """At a step where DefaultStrategy should reset opacities: did it (every opacity at most twice
    prune_opa)? None at other steps. gsplat 1.5.3's reset never fires (see TRAINING.md)."""
    every, stop = getattr(strategy, "reset_every", 0), getattr(strategy, "refine_stop_iter", 0)
    if not every or step_i == 0 or step_i % every or step_i >= stop:
        return None
    return bool(torch.sigmoid(splats["opacities"]).max().item() <= 2 * strategy.prune_opa + 1e-6)


def train(peer: Peer, splats, optimizers, state, views: list[View], scene_scale: float) -> dict:
    """simple_trainer's loop for opts.iterations steps; returns the timing and what happened.

    Training views: a fresh random permutation each pass (DataLoader(shuffle=True), st:848-856)."""
    opts, device = peer.opts, splats["means"].device
    schedulers = [torch.optim.lr_scheduler.ExponentialLR(  # st:811-813
        optimizers["means"], gamma=opts.means_lr_final ** (1.0 / opts.iterations))]
    history, counts, resets, sh_changes, order = [], [], [], [], []
    sync(device)
    start = time.perf_counter()
    for i in range(opts.iterations):
        if not order:
            order = torch.randperm(len(views)).tolist()
        loss, degree = step(peer, splats, optimizers, schedulers, state, i, views[order.pop(0)])
        if not sh_changes or sh_changes[-1][1] != degree:
            sh_changes.append([i, degree])
        reset = opacity_was_reset(peer.strategy, splats, i)
        if reset is not None:
            resets.append({"step": i, "fired": reset})
        if i % opts.log_every == 0 or i + 1 == opts.iterations:
            history.append({"step": i, "loss": loss.item(), "gaussians": len(splats["means"])})
        if i + 1 in opts.count_at:
            sync(device)
            counts.append({"step": i + 1, "gaussians": len(splats["means"]),
                           "seconds": time.perf_counter() - start})
    sync(device)
    seconds = time.perf_counter() - start
    counts.append({"step": opts.iterations, "gaussians": len(splats["means"]), "seconds": seconds})
    return {"train_seconds": seconds, "gaussians": counts, "history": history, "sh_degree_from_step": sh_changes,
            "opacity_resets": resets,
            "final_lr": {k: o.param_groups[0]["lr"] for k, o in optimizers.items()}}


def to_uint8(colors: torch.Tensor) -> np.ndarray:
    """[1,H,W,3] float -> [H,W,3] uint8, exactly as the scorer expects: round(clamp(x, 0, 1) * 255)."""
    return (colors[0].clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()


@torch.no_grad()
def save_renders(peer: Peer, splats, views: list[View], images, out: Path) -> dict:
    """Render every view at simple_trainer's eval SH degree (cfg.sh_degree, st:1232) as
    <out>/<view name>.png (8-bit, lossless), and the PSNR of those 8-bit images against `images`
    ([3,H,W] floats), computed here: a quick check, not the evaluation protocol's score."""
    names = [v.name for v in views]
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"test views need unique non-empty names to be saved as <name>.png; got {names[:5]}...")
    out.mkdir(parents=True, exist_ok=True)
    per_view = {}
    for i, view in enumerate(views):
        colors, _, _ = render(peer, splats, view, peer.opts.sh_degree)
        u8 = to_uint8(colors)
        Image.fromarray(u8).save(out / f"{view.name}.png")
        if images is None:  # cameras without images (--cameras): the scorer compares later
            continue
        ref = images[i]
        mse = ((torch.from_numpy(u8).float() / 255 - ref.permute(1, 2, 0).cpu().float()) ** 2).mean().item()
        per_view[view.name] = 10 * math.log10(1 / mse) if mse > 0 else float("inf")
    if images is None:
        return {"dir": str(out), "count": len(views), "quick_psnr": None}
    return {"dir": str(out), "count": len(per_view),
            "quick_psnr": {"label": "in-process PSNR of the saved 8-bit renders against gsexp's float test "
                                    "images; not the 200-view evaluation protocol's score",
                           "mean": sum(per_view.values()) / max(1, len(per_view)), "per_view": per_view}}
