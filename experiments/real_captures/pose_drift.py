"""Where a pose_opt run's test PSNR goes (issue 41: pose_opt cost fern 1.75 dB, beer 0.55):

    python experiments/real_captures/pose_drift.py <run dir> [--align-steps 200] [--out drift.json]

From the run's newest checkpoint (its per-camera corrections) and its scene:
1. The corrections' shared part. Each training camera's correction moves the world by X' = A_i X + b_i
   (gsexp/train/pose.py); a motion shared by every camera is invisible in the training photos (the
   scene can follow it), so nothing holds it at zero but pose_opt_reg. The mean rotation vector
   (world axes) and mean b against the mean sizes of the per-camera ones say how much of the
   correction is such a drift, and the mean camera-centre shift against its mean size likewise.
2. The test views three ways: as scored (test cameras as SfM gave them); moved by the shared
   motion (what the test cameras would need if the drift were all); and each aligned alone
   (its own correction fitted to its photo with the model frozen: Adam on the L1 loss, the
   protocol of pose-refining methods). If the shared motion recovers the loss, the drift is
   the cause and anchoring the mean correction would remove it; if only per-view alignment
   does, the test cameras' own SfM errors are.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch


def skew(w: torch.Tensor) -> torch.Tensor:
    z = torch.zeros((), dtype=w.dtype)
    return torch.stack([torch.stack([z, -w[2], w[1]]), torch.stack([w[2], z, -w[0]]), torch.stack([-w[1], w[0], z])])


def shared_motion(pose, n: int) -> dict:
    """The mean world motion of n cameras' corrections and how much of them it is (float64)."""
    ws, bs, shifts = [], [], []
    for i in range(n):
        a, b, _ = (t.detach().double().cpu() for t in pose.world_motion(i))
        c = pose.center[i].double().cpu()
        rot_t, d = pose.rot_t[i].double().cpu(), pose.delta[i].detach().double().cpu()
        ws.append(rot_t @ d[:3])  # A's rotation vector: R^T w in world axes
        bs.append(b)
        shifts.append(a.T @ (c - b) - c)  # the corrected camera's centre in the world, less the SfM one
    w, b, s = torch.stack(ws), torch.stack(bs), torch.stack(shifts)
    deg = 180 / math.pi
    return {"w": w.mean(0), "b": b.mean(0),
            "shared_rotation_deg": float(w.mean(0).norm() * deg), "mean_rotation_deg": float(w.norm(dim=1).mean() * deg),
            "shared_b": float(b.mean(0).norm()), "mean_b": float(b.norm(dim=1).mean()),
            "shared_centre_shift": float(s.mean(0).norm()), "mean_centre_shift": float(s.norm(dim=1).mean())}


def delta_for(camera, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The correction (w, t) of `camera` whose world motion is the rotation by w (world axes) and b:
    A = R^T dR R gives dR's rotation vector R w, and b = R^T (dR t + t_corr - t) its t_corr."""
    w2c = camera.world_to_camera.double().cpu()
    rot, trans = w2c[:3, :3], w2c[:3, 3]
    w_cam = rot @ w
    dr = torch.linalg.matrix_exp(skew(w_cam))
    return torch.cat([w_cam, rot @ b - dr @ trans + trans]).float()


def views(g, pose, cameras, images, settings, background) -> list[float]:
    """Each test view's PSNR (gsexp.metrics', as summary.json's) from its corrected camera."""
    from gsexp.metrics import psnr
    from gsexp.render import render
    with torch.no_grad():
        return [psnr(render(pose.apply(g, j), cam, settings, background=background).image.clamp(0, 1), img).item()
                for j, (cam, img) in enumerate(zip(cameras, images))]


def align(g, pose, cameras, images, settings, background, steps: int) -> None:
    """Each test view's correction fitted to its photo, the model frozen."""
    from gsexp.render import render
    for j, (cam, img) in enumerate(zip(cameras, images)):
        for _ in range(steps):
            loss = (render(pose.apply(g, j), cam, settings, background=background).image - img).abs().mean()
            loss.backward()
            pose.step()


def study(run: Path, align_steps: int, lr: float) -> dict:
    from gsexp import eval as gsexp_eval
    from gsexp.config import rasterizer_settings
    from gsexp.errors import UserError
    from gsexp.export import load_model
    from gsexp.train.checkpoint import latest_checkpoint, load_checkpoint
    from gsexp.train.pose import PoseCorrection
    from gsexp.train.setup import load_data, pick_device

    cfg = gsexp_eval.compose(gsexp_eval.parse_args([str(run)]))
    settings = rasterizer_settings(cfg)
    device = pick_device(cfg.device, settings)
    path = latest_checkpoint(run)
    state = load_checkpoint(path) if path is not None else {}
    if "pose" not in state:
        raise UserError(f"{run}: no checkpoint with pose corrections; give a run trained with pose_opt=true")
    g = load_model(run).to(device)
    scene = load_data(cfg)
    train = PoseCorrection(scene.train_cameras, device)
    with torch.no_grad():
        train.delta.copy_(state["pose"]["delta"].to(device))
    drift = shared_motion(train, len(scene.train_cameras))
    cams = [c.to(device) for c in scene.test_cameras]
    images = [img.to(device) for img in scene.test_images]
    bg = tuple(scene.background)
    test = PoseCorrection(scene.test_cameras, device, lr=lr, reg=0.0)
    as_scored = views(g, test, cams, images, settings, bg)
    with torch.no_grad():
        test.delta.copy_(torch.stack([delta_for(c, drift["w"], drift["b"]) for c in scene.test_cameras]).to(device))
    shared = views(g, test, cams, images, settings, bg)
    with torch.no_grad():
        test.delta.zero_()
    align(g, test, cams, images, settings, bg, align_steps)
    aligned = views(g, test, cams, images, settings, bg)
    out = {k: v for k, v in drift.items() if k not in ("w", "b")}
    fitted = test.summary()
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"run": str(run), "checkpoint": str(path), "train_cameras": len(scene.train_cameras), **out,
            "test_views": [c.name for c in scene.test_cameras], "psnr_as_scored": as_scored,
            "psnr_shared_motion": shared, "psnr_aligned": aligned, "align_steps": align_steps, "align_lr": lr,
            "mean_psnr": {"as_scored": mean(as_scored), "shared_motion": mean(shared), "aligned": mean(aligned)},
            "aligned_rotation_deg": fitted["pose_mean_rotation_deg"],
            "aligned_translation": fitted["pose_mean_translation"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="a run directory trained with pose_opt=true")
    p.add_argument("--align-steps", type=int, default=200, help="Adam steps per test view (0: none)")
    p.add_argument("--lr", type=float, default=1e-3, help="the test views' correction learning rate")
    p.add_argument("--out", type=Path, help="also write the result as JSON")
    a = p.parse_args(argv)
    if not (a.run / ".hydra" / "config.yaml").is_file():
        print(f"pose_drift.py: {a.run} is not a run directory (no .hydra/config.yaml)", file=sys.stderr)
        return 2
    from gsexp.errors import USER_ERRORS, one_line
    try:
        r = study(a.run, a.align_steps, a.lr)
    except USER_ERRORS as err:  # e.g. the run's scene moved, or no pose corrections in it
        print(f"pose_drift.py: error: {one_line(err)}", file=sys.stderr)
        return 2
    if a.out:
        a.out.write_text(json.dumps(r, indent=2))
    m = r["mean_psnr"]
    print(f"{a.run}: {r['train_cameras']} training cameras; correction shared / mean: rotation "
          f"{r['shared_rotation_deg']:.4f} / {r['mean_rotation_deg']:.4f} deg, centre shift "
          f"{r['shared_centre_shift']:.5f} / {r['mean_centre_shift']:.5f}")
    print(f"test PSNR ({len(r['test_views'])} views): as scored {m['as_scored']:.2f}, shared motion "
          f"{m['shared_motion']:.2f}, each aligned ({r['align_steps']} steps) {m['aligned']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
