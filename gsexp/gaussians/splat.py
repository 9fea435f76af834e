"""Gaussians <-> the web `.splat` layout of antimatter15/splat (also read by SuperSplat,
gsplat.js, PlayCanvas' splat-transform and others).

No header; 32 bytes per Gaussian, little endian:
  float32 x, y, z          position
  float32 sx, sy, sz       linear scale (exp of the log-scale)
  uint8   r, g, b, a       r, g, b = 255 * (0.5 + C0 * f_dc) and a = 255 * sigmoid(opacity),
                           rounded and clamped to 0..255
  uint8   w, x, y, z       the normalised quaternion, 128 * q + 128, rounded, clamped to 0..255
                           (a reader takes (byte - 128) / 128)

Written in the viewer's own order: by size * opacity, largest first (size = exp(s0 + s1 + s2),
the product of the scales), as both its in-browser converter (main.js) and its convert.py
do. Values round to nearest as the in-browser converter's Uint8ClampedArray does (convert.py
truncates instead). The format has no SH rest: a model of degree > 0 loses its
view-dependent colour (read back as degree 0).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gsexp.atomic import atomic_write
from gsexp.gaussians.compressed import unit_quaternions
from gsexp.gaussians.model import Gaussians
from gsexp.gaussians.sh import C0

ROW = np.dtype([("position", "<f4", (3,)), ("scale", "<f4", (3,)), ("rgba", "u1", (4,)),
                ("rotation", "u1", (4,))])
assert ROW.itemsize == 32
OPACITY_EPS = 1e-6  # keeps alpha bytes 0 / 255 at a finite logit, as the PLY reader does


def splat_order(g: Gaussians) -> np.ndarray:
    """The viewer's order: exp(s0 + s1 + s2) * sigmoid(opacity), descending (stable)."""
    log_volume = g.log_scales.double().sum(1).numpy()
    importance = np.exp(np.clip(log_volume, -700, 700)) / (1 + np.exp(-g.opacity_logits.double().numpy()))
    return np.argsort(-importance, kind="stable")


def _bytes(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def splat_rows(g: Gaussians) -> np.ndarray:
    """The rows of `g` in its own order (no reordering here)."""
    g = g.detach().to("cpu")
    rows = np.empty(len(g), ROW)
    rows["position"] = g.means.float().numpy()
    rows["scale"] = g.log_scales.float().exp().numpy()
    rgb = g.sh[:, 0, :].double().numpy() * C0 + 0.5
    alpha = 1.0 / (1.0 + np.exp(-g.opacity_logits.double().numpy()))
    rows["rgba"] = _bytes(np.concatenate([rgb, alpha[:, None]], 1) * 255)
    rows["rotation"] = _bytes(unit_quaternions(g.quats.numpy()) * 128 + 128)  # a zero one: identity
    return rows


def write_splat(gaussians: Gaussians, path) -> np.ndarray:
    """Write `gaussians` as a .splat file (atomically). Returns the order written: the file's
    row i is gaussians[order[i]]."""
    if len(gaussians) == 0:
        raise ValueError(f"cannot write {path}: the model has no Gaussians")
    g = gaussians.detach().to("cpu")
    order = splat_order(g)
    with atomic_write(Path(path)) as f:
        f.write(splat_rows(g[torch.from_numpy(order)]).tobytes())
    return order


def read_splat(path) -> Gaussians:
    """A .splat file as Gaussians of SH degree 0 (log-scales = log of the stored scales)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f".splat file {path} does not exist or is not a file (check the "
                                f"path; relative paths are resolved from {Path.cwd()})")
    size = path.stat().st_size
    if size == 0 or size % ROW.itemsize:
        raise ValueError(f".splat file {path} has {size} bytes, not a positive multiple of "
                         f"{ROW.itemsize} (one row per Gaussian); it is truncated or not a .splat file.")
    rows = np.fromfile(path, ROW)
    bad = ~(np.isfinite(rows["position"]).all(1) & np.isfinite(rows["scale"]).all(1))
    if bad.any():
        raise ValueError(f".splat file {path}: {int(bad.sum())} row(s) with NaN/Inf position or scale, "
                         f"first row {int(bad.argmax())}; re-export it from a good model.")
    if (rows["scale"] <= 0).any():
        raise ValueError(f".splat file {path}: {int((rows['scale'] <= 0).sum())} row(s) with a scale "
                         f"<= 0 (scales are stored linear, so they must be > 0); not a .splat file?")
    rgba = rows["rgba"].astype(np.float64) / 255
    alpha = np.clip(rgba[:, 3], OPACITY_EPS, 1 - OPACITY_EPS)
    quats = (rows["rotation"].astype(np.float32) - 128) / 128

    def f32(a):
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))

    return Gaussians(means=f32(rows["position"]), log_scales=f32(np.log(rows["scale"])), quats=f32(quats),
                     opacity_logits=f32(-np.log(1.0 / alpha - 1.0)),
                     sh=f32((rgba[:, None, :3] - 0.5) / C0), sh_degree=0)
