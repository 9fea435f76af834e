"""The compressed format: one .npz (deflate) with fp16 attributes, an SH codebook and indices.

Arrays (N Gaussians, K = (sh_degree+1)^2 SH bases):
  format          ["gsexp-compressed-1"]
  sh_degree       int
  means           float32 [N,3]      positions at full precision, or, with position_bits=16:
  means_q         uint16  [N,3]      positions on a 16-bit grid over their bounding box,
  means_lo        float32 [3]        means = means_lo + means_q * means_step (the grid step is
  means_step      float32 [3]        1/65535 of the box: 4.6e-5 units on lego's 3-unit box)
  log_scales      float16 [N,3]
  quats           float16 [N,4]
  opacity_logits  float16 [N]
  sh0             float16 [N,3]      the DC colour term
  sh_rest         float16 [M,K-1,3]  SH rest of the M Gaussians not vector-quantised
  vq_mask         bool    [N]        True where the SH rest comes from the codebook (N - M of them)
  codebook        float16 [C,(K-1)*3]
  vq_index        uint16/int32 [N-M] codebook row of each quantised Gaussian, in Gaussian order
A file without vector quantisation has an all-False vq_mask and an empty codebook.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gsexp.atomic import atomic_write
from gsexp.gaussians import Gaussians

FORMAT = "gsexp-compressed-1"


def encode(g: Gaussians, vq_mask: torch.Tensor | None = None, codebook: torch.Tensor | None = None,
           vq_index: torch.Tensor | None = None, position_bits: int = 32) -> dict[str, np.ndarray]:
    if position_bits not in (16, 32):
        raise ValueError(f"encode: position_bits must be 16 or 32, got {position_bits}")
    n, k = len(g), g.sh.shape[1]
    vq_mask = torch.zeros(n, dtype=torch.bool) if vq_mask is None else vq_mask.detach().cpu().bool()
    rest = g.sh.detach().cpu()[:, 1:]
    if vq_mask.any() and (codebook is None or vq_index is None or len(vq_index) != int(vq_mask.sum())):
        raise ValueError("encode: vq_mask marks Gaussians but the codebook / vq_index do not match it")
    codebook = torch.zeros(0, (k - 1) * 3) if codebook is None else codebook.detach().cpu()
    index = torch.zeros(0, dtype=torch.long) if vq_index is None else vq_index.detach().cpu()

    def half(t):
        return t.detach().cpu().to(torch.float16).numpy()

    return {
        "format": np.array([FORMAT]), "sh_degree": np.array(g.sh_degree),
        **(positions16(g.means) if position_bits == 16 else {"means": g.means.detach().cpu().float().numpy()}),
        "log_scales": half(g.log_scales),
        "quats": half(g.quats), "opacity_logits": half(g.opacity_logits), "sh0": half(g.sh[:, 0]),
        "sh_rest": half(rest[~vq_mask]), "vq_mask": vq_mask.numpy(), "codebook": half(codebook),
        "vq_index": index.numpy().astype(np.uint16 if len(codebook) <= 65536 else np.int32),
    }


def positions16(means: torch.Tensor) -> dict[str, np.ndarray]:
    m = means.detach().cpu().double().numpy()
    lo = m.min(0) if len(m) else np.zeros(3)
    step = np.maximum((m.max(0) - lo) / 65535 if len(m) else np.ones(3), 1e-12)
    q = np.clip(np.rint((m - lo) / step), 0, 65535).astype(np.uint16)
    return {"means_q": q, "means_lo": lo.astype(np.float32), "means_step": step.astype(np.float32)}


def decode(arrays) -> Gaussians:
    if str(arrays["format"][0]) != FORMAT:
        raise ValueError(f"not a {FORMAT} file (format {arrays['format'][0]!r})")

    def f32(name):
        return torch.from_numpy(np.asarray(arrays[name]).astype(np.float32))

    vq_mask = torch.from_numpy(np.asarray(arrays["vq_mask"]))
    n, degree = len(vq_mask), int(arrays["sh_degree"])
    k = (degree + 1) ** 2
    rest = torch.zeros(n, k - 1, 3)
    rest[~vq_mask] = f32("sh_rest").reshape(-1, k - 1, 3)
    if vq_mask.any():
        codes = f32("codebook").reshape(-1, k - 1, 3)
        rest[vq_mask] = codes[torch.from_numpy(np.asarray(arrays["vq_index"]).astype(np.int64))]
    sh = torch.cat([f32("sh0")[:, None], rest], 1)
    if "means_q" in arrays:
        means = f32("means_lo") + f32("means_q") * f32("means_step")
    else:
        means = f32("means")
    return Gaussians(means, f32("log_scales"), f32("quats"), f32("opacity_logits"), sh, degree)


def save(path, arrays: dict) -> float:
    """Write atomically (a temp file, then rename); returns the size in MB (2^20 bytes)."""
    path = Path(path)
    with atomic_write(path) as f:
        np.savez_compressed(f, **arrays)
    return path.stat().st_size / 2**20


def load(path) -> Gaussians:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"compressed Gaussians not found: {path}")
    with np.load(path, allow_pickle=False) as arrays:
        return decode(arrays)
