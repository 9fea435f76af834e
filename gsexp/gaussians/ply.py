"""Gaussians <-> PLY files.

Writes the INRIA 3DGS layout (readable by the reference viewer, SuperSplat, gsplat tools).
Reads the INRIA layout and the PlayCanvas/SuperSplat "compressed" PLY.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from plyfile import PlyData, PlyElement, PlyParseError

from gsexp.atomic import atomic_write
from gsexp.gaussians.model import Gaussians
from gsexp.gaussians.sh import C0, num_sh_bases

REST_COUNT_TO_DEGREE = {0: 0, 9: 1, 24: 2, 45: 3}
INRIA_NEEDS = ("x, y, z, f_dc_0..2, f_rest_* (0, 9, 24 or 45 of them for SH degree 0..3), "
               "opacity, scale_0..2 and rot_0..3 (nx, ny, nz are optional)")
CHUNK_SIZE = 256  # vertices per chunk in the compressed format
OPACITY_EPS = 1e-6  # keeps alpha bytes 0 / 255 at a finite logit


def inria_property_names(sh_degree: int) -> list[str]:
    """Vertex property names, in file order, of an INRIA 3DGS PLY of this SH degree."""
    n_rest = 3 * (num_sh_bases(sh_degree) - 1)
    return (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
            + [f"f_rest_{i}" for i in range(n_rest)]
            + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])


# ----------------------------------------------------------------------------- writing

def save_ply(gaussians: Gaussians, path) -> None:
    """Write `gaussians` as an INRIA 3DGS PLY (binary little endian, float32).

    Atomic: the data goes to a temp file in the same folder, then replaces `path`,
    so a crash never leaves a half-written file there.
    """
    path = Path(path)
    g = gaussians.detach().to("cpu")
    n = len(g)
    rest = g.sh[:, 1:, :].transpose(1, 2).reshape(n, 3 * (g.sh.shape[1] - 1))  # channel-major: all R, then G, then B
    cols = [g.means, torch.zeros(n, 3), g.sh[:, 0, :], rest, g.opacity_logits[:, None],
            g.log_scales, g.quats]
    data = np.ascontiguousarray(torch.cat([c.float() for c in cols], 1).numpy(), dtype="<f4")
    names = inria_property_names(g.sh_degree)
    vertex = data.view(np.dtype([(name, "<f4") for name in names])).reshape(n)
    ply = PlyData([PlyElement.describe(vertex, "vertex")], text=False, byte_order="<")

    with atomic_write(path) as f:
        ply.write(f)


# ----------------------------------------------------------------------------- reading

def load_ply(path) -> Gaussians:
    """Read an INRIA 3DGS PLY or a PlayCanvas/SuperSplat compressed PLY (chosen by the header)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"PLY file {path} does not exist or is not a file (check the "
                                f"path; relative paths are resolved from {Path.cwd()})")
    try:
        ply = PlyData.read(str(path))
    except (PlyParseError, ValueError, EOFError) as e:
        raise ValueError(f"PLY file {path} is truncated or corrupt: {e}. "
                         f"Re-export or re-copy the file.") from e
    elements = {el.name: el for el in ply.elements}
    if "vertex" not in elements:
        raise ValueError(f"PLY file {path} has no 'vertex' element (elements: {list(elements)}); "
                         f"it is not a Gaussian splat PLY. Expected an INRIA 3DGS PLY with "
                         f"vertex properties {INRIA_NEEDS}.")
    if "packed_position" in elements["vertex"].data.dtype.names:
        return _load_compressed(path, elements)
    return _load_inria(path, elements["vertex"])


def _columns(path, element, names) -> np.ndarray:
    """The named properties of `element` as a float32 [N, len(names)] array, checked finite."""
    cols = np.stack([np.asarray(element[n], dtype=np.float32) for n in names], axis=1)
    bad = ~np.isfinite(cols)
    if bad.any():
        j = int(bad.any(0).argmax())
        raise ValueError(
            f"PLY file {path}: property '{names[j]}' of element '{element.name}' has "
            f"{int(bad[:, j].sum())} NaN/Inf value(s), first at {element.name} "
            f"{int(bad[:, j].argmax())}. The model that wrote it probably diverged; re-export "
            f"from a good checkpoint or drop those vertices.")
    return cols


def _require(path, element, names, what: str) -> None:
    missing = [n for n in names if n not in element.data.dtype.names]
    if missing:
        raise ValueError(f"PLY file {path}: element '{element.name}' lacks propert"
                         f"{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)}. {what}")


def _load_inria(path, vertex) -> Gaussians:
    n_rest = sum(name.startswith("f_rest_") for name in vertex.data.dtype.names)
    if n_rest not in REST_COUNT_TO_DEGREE:
        raise ValueError(f"PLY file {path} has {n_rest} f_rest_* properties; an INRIA 3DGS PLY has "
                         f"0, 9, 24 or 45 (SH degree 0, 1, 2, 3). The file is not in the INRIA "
                         f"layout or was written with a different SH convention.")
    degree = REST_COUNT_TO_DEGREE[n_rest]
    names = [n for n in inria_property_names(degree) if n not in ("nx", "ny", "nz")]
    _require(path, vertex, names, f"An INRIA 3DGS PLY needs vertex properties {INRIA_NEEDS}.")

    t = torch.from_numpy(_columns(path, vertex, names))
    n, k = t.shape[0], num_sh_bases(degree)
    o = 6 + n_rest  # columns: xyz, f_dc, f_rest, opacity, scale, rot
    sh = torch.cat([t[:, None, 3:6], t[:, 6:o].reshape(n, 3, k - 1).transpose(1, 2)], 1)
    return Gaussians(means=t[:, 0:3].contiguous(), log_scales=t[:, o + 1:o + 4].contiguous(),
                     quats=t[:, o + 4:o + 8].contiguous(), opacity_logits=t[:, o].contiguous(),
                     sh=sh.contiguous(), sh_degree=degree)


# PlayCanvas compressed PLY: per chunk of 256 vertices, float min/max of position, log-scale
# and (newer files) colour; per vertex four uint32 holding those quantised within the chunk
# range; an optional 'sh' element with uint8 f_rest_*.
CHUNK_POS = ["min_x", "min_y", "min_z", "max_x", "max_y", "max_z"]
CHUNK_SCALE = ["min_scale_x", "min_scale_y", "min_scale_z",
               "max_scale_x", "max_scale_y", "max_scale_z"]
CHUNK_COLOR = ["min_r", "min_g", "min_b", "max_r", "max_g", "max_b"]
PACKED = ["packed_position", "packed_rotation", "packed_scale", "packed_color"]
COMPRESSED_NEEDS = ("A compressed PLY needs a 'chunk' element with "
                    + ", ".join(CHUNK_POS + CHUNK_SCALE) + " (min_r..max_b optional) and a "
                    "'vertex' element with " + ", ".join(PACKED) + ".")


def sh_rest_of_bytes(raw: np.ndarray) -> np.ndarray:
    """The compressed format's SH rest bytes as values. The format fixes their range: SuperSplat
    writes clamp(trunc((v / 8 + 0.5) * 256)) over [-4, 4), so a byte is read as its bucket's midpoint."""
    return ((raw.astype(np.float32) + 0.5) / 256 - 0.5) * 8


def _f32(a) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _unorm(v: np.ndarray, shift: int, bits: int) -> np.ndarray:
    mask = (1 << bits) - 1
    return ((v >> shift) & mask).astype(np.float32) / mask


def _unpack_111011(v):
    return np.stack([_unorm(v, 21, 11), _unorm(v, 11, 10), _unorm(v, 0, 11)], 1)


def _unpack_rotation(v):
    """'Smallest three': top 2 bits = index of the largest component, rebuilt from the unit
    norm; the other three, in order, are 10-bit in [-1/sqrt2, 1/sqrt2].

    The slots are rot_0..rot_3 as in the INRIA PLY, i.e. already our wxyz: SuperSplat packs
    (rot_0, rot_1, rot_2, rot_3) and the PlayCanvas decompressor writes slot i back to rot_i.
    (PlayCanvas names the slots x, y, z, w, which suggests xyzw but is not.) In trained
    scenes index 0 (w) is then by far the most common largest component, as expected.
    """
    abc = np.stack([_unorm(v, 20, 10), _unorm(v, 10, 10), _unorm(v, 0, 10)], 1)
    abc = (abc - 0.5) * np.float32(np.sqrt(2.0))
    m = np.sqrt(np.clip(1.0 - (abc * abc).sum(1, keepdims=True), 0.0, None))
    full = np.concatenate([abc, m], 1)  # a, b, c, largest
    # for largest index k, which column of `full` each of the 4 slots comes from
    source = np.array([[3, 0, 1, 2], [0, 3, 1, 2], [0, 1, 3, 2], [0, 1, 2, 3]])
    return np.take_along_axis(full, source[(v >> 30).astype(np.int64)], axis=1)


def _load_compressed(path, elements) -> Gaussians:
    if "chunk" not in elements:
        raise ValueError(f"PLY file {path} has packed vertex properties but no 'chunk' element. "
                         f"{COMPRESSED_NEEDS}")
    chunk, vertex = elements["chunk"], elements["vertex"]
    _require(path, chunk, CHUNK_POS + CHUNK_SCALE, COMPRESSED_NEEDS)
    _require(path, vertex, PACKED, COMPRESSED_NEEDS)
    n = vertex.count
    if chunk.count * CHUNK_SIZE < n:
        raise ValueError(f"PLY file {path} has {chunk.count} chunks for {n} vertices; a compressed "
                         f"PLY needs one chunk per {CHUNK_SIZE} vertices. The file is corrupt.")
    has_color = all(p in chunk.data.dtype.names for p in CHUNK_COLOR)
    ranges = _columns(path, chunk, CHUNK_POS + CHUNK_SCALE + (CHUNK_COLOR if has_color else []))
    ranges = ranges[np.arange(n) // CHUNK_SIZE]  # per vertex

    def lerp(i, t):  # columns i..i+2 hold the min, i+3..i+5 the max
        lo, hi = ranges[:, i:i + 3], ranges[:, i + 3:i + 6]
        return lo + (hi - lo) * t

    packed = {p: np.asarray(vertex[p]).astype(np.uint32) for p in PACKED}
    means = lerp(0, _unpack_111011(packed["packed_position"]))
    log_scales = lerp(6, _unpack_111011(packed["packed_scale"]))
    quats = _unpack_rotation(packed["packed_rotation"])
    c = packed["packed_color"]
    rgba = np.stack([_unorm(c, 24, 8), _unorm(c, 16, 8), _unorm(c, 8, 8), _unorm(c, 0, 8)], 1)
    rgb = lerp(12, rgba[:, :3]) if has_color else rgba[:, :3]  # old files: plain 8-bit colour
    alpha = np.clip(rgba[:, 3].astype(np.float64), OPACITY_EPS, 1 - OPACITY_EPS)
    opacity_logits = -np.log(1.0 / alpha - 1.0)

    rest, degree = np.zeros((n, 0), np.float32), 0
    if "sh" in elements:
        sh_el = elements["sh"]
        names = [f"f_rest_{i}" for i in range(sum(p.startswith("f_rest_")
                                                    for p in sh_el.data.dtype.names))]
        if len(names) not in REST_COUNT_TO_DEGREE or sh_el.count != n:
            raise ValueError(f"PLY file {path}: element 'sh' has {sh_el.count} rows of "
                             f"{len(names)} f_rest_* properties; expected {n} rows of 9, 24 or 45.")
        _require(path, sh_el, names, f"The 'sh' element needs f_rest_0..f_rest_{len(names) - 1}.")
        degree = REST_COUNT_TO_DEGREE[len(names)]
        rest = sh_rest_of_bytes(np.stack([np.asarray(sh_el[p]) for p in names], 1))

    k = num_sh_bases(degree)
    sh = np.concatenate([((rgb - 0.5) / C0)[:, None, :],
                         rest.reshape(n, 3, k - 1).transpose(0, 2, 1)], 1)
    return Gaussians(means=_f32(means), log_scales=_f32(log_scales), quats=_f32(quats),
                     opacity_logits=_f32(opacity_logits), sh=_f32(sh), sh_degree=degree)
