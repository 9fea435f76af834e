"""Gaussians -> the PlayCanvas/SuperSplat "compressed" PLY: the inverse of the reader in
gsexp.gaussians.ply (`load_ply` detects the layout), following SuperSplat's writer.

Layout (binary little endian):
  element chunk  (one per 256 Gaussians)  float min_x..max_z, min_scale_x..max_scale_z,
                                          min_r..max_b: the chunk's box of position,
                                          log-scale and SH-DC colour (0.5 + C0 * f_dc)
  element vertex (one per Gaussian)       uint packed_position  11/10/11 bits within the box
                                          uint packed_rotation  2-bit index of the largest
                                               |component| + the other three, 10 bits each
                                               over [-1/sqrt2, 1/sqrt2] ("smallest three")
                                          uint packed_scale     11/10/11 bits, log-scale box
                                          uint packed_color     8/8/8 bits RGB within the
                                               colour box, 8 bits sigmoid(opacity) over [0, 1]
  element sh     (degree > 0 only)        uchar f_rest_0..: INRIA's channel-major f_rest,
                                          trunc((v / 8 + 0.5) * 256) clamped to 0..255
                                          (the range is the format's, fixed: PlayCanvas reads
                                          a byte b as b * 8 / 255 - 4; no file can say otherwise)

As SuperSplat does, the Gaussians are first put in Morton order (10 bits per axis over the
scene's box), so each chunk's box is small; chunk log-scale bounds are clamped to [-20, 20].
Unlike SuperSplat, the last, partial chunk's box covers only its own Gaussians.
16 bytes per Gaussian (+ 3 * ((d+1)^2 - 1) for SH degree d) and 72 per chunk.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from plyfile import PlyData, PlyElement

from gsexp.atomic import atomic_write
from gsexp.gaussians.model import Gaussians
from gsexp.gaussians.ply import CHUNK_COLOR, CHUNK_POS, CHUNK_SCALE, CHUNK_SIZE, PACKED, sh_rest_of_bytes
from gsexp.gaussians.sh import C0, num_sh_bases

LOG_SCALE_LIMIT = 20.0  # SuperSplat clamps the chunk's log-scale bounds (some are at infinity)


def morton_order(means: np.ndarray) -> np.ndarray:
    """Indices sorting `means` [N, 3] along a 3D Morton curve of 1024^3 cells over their box."""
    lo, hi = means.min(0), means.max(0)
    extent = np.where(hi > lo, hi - lo, 1.0)
    cells = np.clip(np.floor(1024 * (means - lo) / extent), 0, 1023).astype(np.uint64)
    code = np.zeros(len(means), np.uint64)
    for bit in range(10):
        for axis in range(3):  # x lowest, as SuperSplat's encodeMorton3
            code |= ((cells[:, axis] >> np.uint64(bit)) & np.uint64(1)) << np.uint64(3 * bit + axis)
    return np.argsort(code, kind="stable")


def _chunked(x: np.ndarray) -> np.ndarray:
    """[N, C] -> [chunks, 256, C], the last chunk padded with its last row (min/max unchanged)."""
    pad = -len(x) % CHUNK_SIZE
    x = np.concatenate([x, np.repeat(x[-1:], pad, 0)]) if pad else x
    return x.reshape(-1, CHUNK_SIZE, x.shape[1])


def _unorm(t: np.ndarray, bits: int) -> np.ndarray:
    """[0, 1] -> unsigned `bits`-bit integers, rounded to nearest (SuperSplat's packUnorm)."""
    top = (1 << bits) - 1
    return np.clip(np.floor(t * top + 0.5), 0, top).astype(np.uint32)


def _in_box(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """x [chunks, 256, 3] as a fraction of its chunk's box [chunks, 3]; 0 where the box is flat."""
    lo, hi = lo[:, None], hi[:, None]
    span = hi - lo
    return np.clip(np.where(span > 0, (x - lo) / np.where(span > 0, span, 1.0), 0.0), 0.0, 1.0)


def _pack_111011(t: np.ndarray) -> np.ndarray:
    return (_unorm(t[..., 0], 11) << 21) | (_unorm(t[..., 1], 10) << 11) | _unorm(t[..., 2], 11)


def _box(x: np.ndarray, limit: float | None = None):
    """Per-chunk min and max [chunks, 3] (float32, as stored), optionally clamped."""
    lo, hi = x.min(1).astype(np.float32), x.max(1).astype(np.float32)
    if limit is not None:
        lo, hi = np.clip(lo, -limit, limit), np.clip(hi, -limit, limit)
    return lo, hi


def unit_quaternions(quats: np.ndarray) -> np.ndarray:
    """[N, 4] wxyz, normalised in float64; a zero quaternion becomes the identity."""
    q = quats.astype(np.float64)
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    return np.where(norm > 0, q / np.where(norm > 0, norm, 1.0), np.array([1.0, 0.0, 0.0, 0.0]))


def pack_rotation(quats: np.ndarray) -> np.ndarray:
    """wxyz quaternions [N, 4] -> 2 bits index of the largest |component| + three 10-bit
    components (the slots in order, the largest left out), sign chosen so the largest is > 0.
    A zero quaternion is stored as the identity."""
    q = unit_quaternions(quats)
    largest = np.abs(q).argmax(1)
    q *= np.where(q[np.arange(len(q)), largest] < 0, -1.0, 1.0)[:, None]
    others = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])[largest]
    abc = _unorm(np.take_along_axis(q, others, 1) * math.sqrt(0.5) + 0.5, 10)
    return (largest.astype(np.uint32) << 30) | (abc[:, 0] << 20) | (abc[:, 1] << 10) | abc[:, 2]


def sh_rest_bytes(rest: np.ndarray) -> np.ndarray:
    """SH rest values as the format's bytes: 8 bits over the fixed range [-4, 4), as SuperSplat."""
    return np.clip(np.trunc((rest / 8 + 0.5) * 256), 0, 255).astype(np.uint8)


def _pack_sh_rest(g: Gaussians) -> np.ndarray | None:
    """The 'sh' element's bytes [N, 3 * (K - 1)], INRIA's channel-major order; None at degree 0."""
    if g.sh_degree == 0:
        return None
    n = len(g)
    return sh_rest_bytes(g.sh[:, 1:, :].transpose(1, 2).reshape(n, -1).double().numpy())


def useful_sh_degree(g: Gaussians) -> int:
    """The SH degree worth storing. The format's SH rest step is fixed (8/256 = 0.031), and a
    trained model's rest is often smaller than that; so keep the bands up to the degree with the
    least squared error (bands are orthonormal: their errors add), a band stored or left out."""
    rest = g.detach().sh[:, 1:, :].double().numpy()
    stored = (sh_rest_of_bytes(sh_rest_bytes(rest)) - rest) ** 2
    dropped = rest ** 2
    errors = [stored[:, :num_sh_bases(d) - 1].sum() + dropped[:, num_sh_bases(d) - 1:].sum()
              for d in range(g.sh_degree + 1)]
    return int(np.argmin(errors))


def _structured(columns: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    out = np.empty(len(next(iter(columns.values()))), [(k, dtype) for k in columns])
    for k, v in columns.items():
        out[k] = v
    return out


def compressed_elements(g: Gaussians) -> list[PlyElement]:
    """The chunk, vertex (and sh) elements of `g`, in the order given (no reordering here)."""
    g = g.detach().to("cpu")
    n = len(g)
    pos = _chunked(g.means.double().numpy())
    scale = _chunked(g.log_scales.double().numpy())
    rgb = _chunked(g.sh[:, 0, :].double().numpy() * C0 + 0.5)
    (plo, phi), (slo, shi), (clo, chi) = _box(pos), _box(scale, LOG_SCALE_LIMIT), _box(rgb)

    alpha = 1.0 / (1.0 + np.exp(-g.opacity_logits.double().numpy()))
    colour = _in_box(rgb, clo, chi).reshape(-1, 3)[:n]
    packed = {
        "packed_position": _pack_111011(_in_box(pos, plo, phi)).reshape(-1)[:n],
        "packed_rotation": pack_rotation(g.quats.numpy()),
        "packed_scale": _pack_111011(_in_box(scale, slo, shi)).reshape(-1)[:n],
        "packed_color": ((_unorm(colour[:, 0], 8) << 24) | (_unorm(colour[:, 1], 8) << 16)
                         | (_unorm(colour[:, 2], 8) << 8) | _unorm(alpha, 8)),
    }
    bounds = np.concatenate([plo, phi, slo, shi, clo, chi], 1)
    names = CHUNK_POS + CHUNK_SCALE + CHUNK_COLOR
    elements = [PlyElement.describe(_structured(dict(zip(names, bounds.T)), "<f4"), "chunk"),
                PlyElement.describe(_structured(dict(zip(PACKED, packed.values())), "<u4"), "vertex")]
    rest = _pack_sh_rest(g)
    if rest is not None:
        sh = _structured({f"f_rest_{i}": rest[:, i] for i in range(rest.shape[1])}, "u1")
        elements.append(PlyElement.describe(sh, "sh"))
    return elements


def save_compressed_ply(gaussians: Gaussians, path, sh_degree: int | None = None) -> np.ndarray:
    """Write `gaussians` as a PlayCanvas/SuperSplat compressed PLY (atomically), with SH up to
    `sh_degree` (None: useful_sh_degree, the bands worth their 8 bits).

    Returns the order written: the file's Gaussian i is gaussians[order[i]] (Morton order)."""
    if len(gaussians) == 0:
        raise ValueError(f"cannot write {path}: the model has no Gaussians")
    g = gaussians.detach().to("cpu")
    g = g.with_sh_degree(useful_sh_degree(g) if sh_degree is None else sh_degree)
    order = morton_order(g.means.double().numpy())
    ply = PlyData(compressed_elements(g[torch.from_numpy(order)]), text=False, byte_order="<",
                  comments=["Generated by gsexp (PlayCanvas compressed PLY)"])
    with atomic_write(Path(path)) as f:
        ply.write(f)
    return order

