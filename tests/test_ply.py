"""PLY I/O: INRIA layout round trips, the PlayCanvas compressed PLY, and bad input."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import plyfile
import pytest
import torch
from plyfile import PlyData, PlyElement

from gsexp.gaussians import Gaussians, load_ply, save_ply
from gsexp.gaussians.sh import C0

SHARED = Path(os.environ.get("GSEXP_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
SCENES = SHARED / "data" / "scenes"
INRIA_9K = SCENES / "inria_format_9k.ply"
BIKER = SCENES / "biker.compressed.ply"


def need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"shared data file {path} not found (set GSEXP_SHARED)")
    return path


def expected_names(degree: int) -> list[str]:
    """The INRIA 3DGS vertex layout, written out independently of gsexp."""
    n_rest = 3 * ((degree + 1) ** 2 - 1)
    return ("x y z nx ny nz f_dc_0 f_dc_1 f_dc_2".split()
            + [f"f_rest_{i}" for i in range(n_rest)]
            + "opacity scale_0 scale_1 scale_2 rot_0 rot_1 rot_2 rot_3".split())


def random_gaussians(n: int, degree: int, seed: int = 0) -> Gaussians:
    gen = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    return Gaussians(r(n, 3) * 5, r(n, 3) - 4, r(n, 4), r(n) * 3, r(n, (degree + 1) ** 2, 3),
                     degree)


def assert_same(a: Gaussians, b: Gaussians) -> None:
    assert a.sh_degree == b.sh_degree
    for name in Gaussians.TENSORS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == torch.float32, name
        assert torch.equal(x, y), name


def write_vertex_ply(path: Path, columns: dict[str, np.ndarray]) -> Path:
    data = np.empty(len(next(iter(columns.values()))), [(k, "<f4") for k in columns])
    for k, v in columns.items():
        data[k] = v
    PlyData([PlyElement.describe(data, "vertex")]).write(str(path))
    return path


def vertex_columns(path: Path) -> dict[str, np.ndarray]:
    v = PlyData.read(str(path))["vertex"].data
    return {k: np.array(v[k]) for k in v.dtype.names}


# ----------------------------------------------------------------------------- INRIA layout

@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_round_trip_is_bit_exact(tmp_path, degree):
    g = random_gaussians(1000, degree, seed=degree)
    save_ply(g, tmp_path / "g.ply")
    assert_same(load_ply(tmp_path / "g.ply"), g)


@pytest.mark.parametrize("degree", [0, 3])
def test_written_layout_is_inria(tmp_path, degree):
    g = random_gaussians(50, degree)
    save_ply(g, tmp_path / "sub" / "dir" / "g.ply")  # creates parent folders
    ply = PlyData.read(str(tmp_path / "sub" / "dir" / "g.ply"))
    assert [e.name for e in ply.elements] == ["vertex"]
    assert not ply.text and ply.byte_order == "<"
    v = ply["vertex"].data
    assert list(v.dtype.names) == expected_names(degree)
    assert all(v.dtype[k] == np.dtype("<f4") for k in v.dtype.names)
    assert np.all(v["nx"] == 0) and np.all(v["ny"] == 0) and np.all(v["nz"] == 0)
    np.testing.assert_array_equal(v["rot_0"], g.quats[:, 0].numpy())  # w first, unnormalised
    np.testing.assert_array_equal(v["opacity"], g.opacity_logits.numpy())
    np.testing.assert_array_equal(v["scale_2"], g.log_scales[:, 2].numpy())
    if degree == 3:  # channel-major rest: 15 R coefficients, then 15 G, then 15 B
        np.testing.assert_array_equal(v["f_rest_0"], g.sh[:, 1, 0].numpy())
        np.testing.assert_array_equal(v["f_rest_14"], g.sh[:, 15, 0].numpy())
        np.testing.assert_array_equal(v["f_rest_15"], g.sh[:, 1, 1].numpy())
        np.testing.assert_array_equal(v["f_rest_44"], g.sh[:, 15, 2].numpy())


def test_inria_9k_loads():
    g = load_ply(need(INRIA_9K))
    assert len(g) == 9080 and g.sh_degree == 3
    assert g.sh.shape == (9080, 16, 3)
    assert all(torch.isfinite(t).all() for t in g.tensors().values())


def test_inria_9k_resave_is_bit_exact_and_same_layout(tmp_path):
    g = load_ply(need(INRIA_9K))
    save_ply(g, tmp_path / "again.ply")
    assert_same(load_ply(tmp_path / "again.ply"), g)
    ours = list(PlyData.read(str(tmp_path / "again.ply"))["vertex"].data.dtype.names)
    theirs = list(PlyData.read(str(INRIA_9K))["vertex"].data.dtype.names)
    assert ours == theirs == expected_names(3)
    # and every stored float came back unchanged (normals are zero in both)
    a, b = vertex_columns(INRIA_9K), vertex_columns(tmp_path / "again.ply")
    for k in theirs:
        if k not in ("nx", "ny", "nz"):
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# ----------------------------------------------------------------------------- compressed PLY

def test_biker_compressed_loads():
    g = load_ply(need(BIKER))
    assert len(g) == 152_746 and g.sh_degree == 0
    assert all(torch.isfinite(t).all() for t in g.tensors().values())
    norms = g.quats.norm(dim=1)  # smallest-three decoding gives unit quaternions directly
    assert (norms - 1).abs().max() < 1e-3
    # trained from identity rotations, w stays the largest component for most splats; a wrong
    # slot order (e.g. reading the packed slots as xyzw) would put it first for about 1%
    assert (g.quats.abs().argmax(1) == 0).float().mean() > 0.5
    o = g.opacities
    assert ((o > 0) & (o < 1)).all()
    assert (g.means.abs() < 10).all()
    extent = (g.means.max(0).values - g.means.min(0).values).max()
    assert 0.5 < extent < 10
    rel = g.scales / extent
    assert rel.median() > 1e-4 and rel.max() < 1
    rgb = g.sh[:, 0] * C0 + 0.5
    assert rgb.min() > -0.01 and rgb.max() < 1.01


def _unorm(x, bits):  # round to nearest, as the SuperSplat writer does
    t = (1 << bits) - 1
    return np.clip(np.floor(np.asarray(x, np.float64) * t + 0.5), 0, t).astype(np.uint32)


def _norm01(x, lo, hi):
    return np.where(hi > lo, (x - lo) / np.where(hi > lo, hi - lo, 1), 0.0)


def encode_compressed(path, means, log_scales, quats_wxyz, rgb, alpha, rest=None,
                      colour_range=True):
    """A small test-side writer of the PlayCanvas compressed PLY."""
    n = len(means)
    ci = np.arange(n) // 256
    n_chunks = ci[-1] + 1

    def ranges(x):
        lo = np.stack([x[ci == c].min(0) for c in range(n_chunks)])
        hi = np.stack([x[ci == c].max(0) for c in range(n_chunks)])
        return lo, hi

    def pack111011(x, lo, hi):
        t = _norm01(x, lo[ci], hi[ci])
        return (_unorm(t[:, 0], 11) << 21) | (_unorm(t[:, 1], 10) << 11) | _unorm(t[:, 2], 11)

    plo, phi = ranges(means)
    slo, shi = ranges(log_scales)
    clo, chi = ranges(rgb)

    q = quats_wxyz / np.linalg.norm(quats_wxyz, axis=1, keepdims=True)
    largest = np.abs(q).argmax(1)
    q = q * np.where(q[np.arange(n), largest] < 0, -1.0, 1.0)[:, None]
    rot = largest.astype(np.uint32)
    for i in range(n):
        for s in (q[i, j] for j in range(4) if j != largest[i]):
            rot[i] = (rot[i] << 10) | _unorm(s / np.sqrt(2) + 0.5, 10)

    c = _norm01(rgb, clo[ci], chi[ci]) if colour_range else rgb
    color = ((_unorm(c[:, 0], 8) << 24) | (_unorm(c[:, 1], 8) << 16) | (_unorm(c[:, 2], 8) << 8)
             | _unorm(alpha, 8))

    chunk_names = ["min_x", "min_y", "min_z", "max_x", "max_y", "max_z",
                   "min_scale_x", "min_scale_y", "min_scale_z",
                   "max_scale_x", "max_scale_y", "max_scale_z"]
    chunk_vals = [plo, phi, slo, shi]
    if colour_range:
        chunk_names += ["min_r", "min_g", "min_b", "max_r", "max_g", "max_b"]
        chunk_vals += [clo, chi]
    chunk = np.empty(n_chunks, [(k, "<f4") for k in chunk_names])
    for k, v in zip(chunk_names, np.concatenate(chunk_vals, 1).T):
        chunk[k] = v
    vertex = np.empty(n, [(k, "<u4") for k in
                          ["packed_position", "packed_rotation", "packed_scale", "packed_color"]])
    vertex["packed_position"] = pack111011(means, plo, phi)
    vertex["packed_rotation"] = rot
    vertex["packed_scale"] = pack111011(log_scales, slo, shi)
    vertex["packed_color"] = color
    elements = [PlyElement.describe(chunk, "chunk"), PlyElement.describe(vertex, "vertex")]
    if rest is not None:  # INRIA channel-major f_rest, 8 bits over [-4, 4)
        sh = np.empty(n, [(f"f_rest_{i}", "u1") for i in range(rest.shape[1])])
        for i in range(rest.shape[1]):
            sh[f"f_rest_{i}"] = np.clip(np.trunc((rest[:, i] / 8 + 0.5) * 256), 0, 255)
        elements.append(PlyElement.describe(sh, "sh"))
    PlyData(elements).write(str(path))
    return path


@pytest.mark.parametrize("colour_range", [True, False])
def test_compressed_decoding_matches_encoder(tmp_path, colour_range):
    rng = np.random.default_rng(0)
    n = 300  # one full chunk and one partial
    means = rng.uniform(-2, 3, (n, 3))
    log_scales = rng.uniform(-7, -1, (n, 3))
    quats = rng.normal(size=(n, 4)) * rng.uniform(0.2, 3, (n, 1))  # unnormalised wxyz
    quats[:6] = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1],
                 [-0.9, 0.1, -0.3, 0.2], [0.1, 0.2, -0.95, 0.1]]  # each slot largest, signs
    rgb = rng.uniform(0, 1, (n, 3))
    alpha = rng.uniform(0.01, 0.99, n)
    rest = rng.uniform(-3.9, 3.9, (n, 9))
    path = encode_compressed(tmp_path / "c.ply", means, log_scales, quats, rgb, alpha, rest,
                             colour_range)

    g = load_ply(path)
    assert len(g) == n and g.sh_degree == 1
    q = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    dots = np.abs((g.quats.double().numpy() * q).sum(1))
    assert dots.min() > 0.999
    np.testing.assert_allclose(g.quats.norm(dim=1).numpy(), 1, atol=1e-5)

    # within half a quantisation step of the chunk range (+ float32 slack)
    def span(x):
        return max(np.ptp(x[:256], 0).max(), np.ptp(x[256:], 0).max())

    step = np.array([2047, 1023, 2047])
    assert (np.abs(g.means.numpy() - means) <= span(means) / step / 2 + 1e-5).all()
    assert (np.abs(g.log_scales.numpy() - log_scales) <= span(log_scales) / step / 2 + 1e-5).all()
    rgb_tol = (span(rgb) if colour_range else 1.0) / 255 / 2 + 1e-5
    assert (np.abs(g.sh[:, 0].numpy() * C0 + 0.5 - rgb) <= rgb_tol).all()
    assert (np.abs(g.opacities.numpy() - alpha) <= 0.5 / 255 + 1e-5).all()
    # SH rest: truncating writer + midpoint decode -> within half a bucket (8/256/2)
    rest_back = g.sh[:, 1:].transpose(1, 2).reshape(n, 9).numpy()
    assert (np.abs(rest_back - rest) <= 8 / 256 / 2 + 1e-5).all()


def test_compressed_alpha_extremes_stay_finite(tmp_path):
    n = 4
    path = encode_compressed(tmp_path / "c.ply", np.eye(4, 3), -np.ones((n, 3)),
                             np.tile([1.0, 0, 0, 0], (n, 1)), np.full((n, 3), 0.5),
                             np.array([0.0, 1.0, 0.5, 1.0]))
    g = load_ply(path)
    assert torch.isfinite(g.opacity_logits).all()
    assert g.opacities[0] < 1e-5 and g.opacities[1] > 1 - 1e-5


# ----------------------------------------------------------------------------- bad input

@pytest.fixture
def good_columns(tmp_path):
    save_ply(random_gaussians(20, 1), tmp_path / "good.ply")
    return vertex_columns(tmp_path / "good.ply")


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="nope.ply"):
        load_ply("/nonexistent/dir/nope.ply")


def test_truncated_file(tmp_path):
    save_ply(random_gaussians(500, 3), tmp_path / "full.ply")
    data = (tmp_path / "full.ply").read_bytes()
    (tmp_path / "cut.ply").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt") as e:
        load_ply(tmp_path / "cut.ply")
    assert "cut.ply" in str(e.value)


def test_missing_property(tmp_path, good_columns):
    del good_columns["opacity"]
    path = write_vertex_ply(tmp_path / "no_opacity.ply", good_columns)
    with pytest.raises(ValueError) as e:
        load_ply(path)
    msg = str(e.value)
    assert "no_opacity.ply" in msg and "opacity" in msg and "rot_0..3" in msg


def test_nan_is_rejected(tmp_path, good_columns):
    good_columns["scale_1"][[3, 7]] = [np.nan, np.inf]
    path = write_vertex_ply(tmp_path / "nan.ply", good_columns)
    with pytest.raises(ValueError) as e:
        load_ply(path)
    msg = str(e.value)
    assert "nan.ply" in msg and "'scale_1'" in msg and "2 NaN/Inf" in msg and "vertex 3" in msg


def test_wrong_f_rest_count(tmp_path, good_columns):
    del good_columns["f_rest_8"]  # degree 1 has 9; 8 is no SH degree
    path = write_vertex_ply(tmp_path / "rest8.ply", good_columns)
    with pytest.raises(ValueError) as e:
        load_ply(path)
    msg = str(e.value)
    assert "rest8.ply" in msg and "8 f_rest_*" in msg and "0, 9, 24 or 45" in msg


def test_no_vertex_element(tmp_path):
    face = np.zeros(2, [("a", "<f4")])
    PlyData([PlyElement.describe(face, "face")]).write(str(tmp_path / "face.ply"))
    with pytest.raises(ValueError, match="face.ply.*no 'vertex' element"):
        load_ply(tmp_path / "face.ply")


def test_compressed_missing_chunk_property(tmp_path):
    path = encode_compressed(tmp_path / "c.ply", np.zeros((3, 3)), np.zeros((3, 3)),
                             np.tile([1.0, 0, 0, 0], (3, 1)), np.full((3, 3), 0.5),
                             np.full(3, 0.5))
    ply = PlyData.read(str(path))
    chunk = ply["chunk"].data
    keep = [k for k in chunk.dtype.names if k != "max_scale_y"]
    trimmed = np.empty(len(chunk), [(k, "<f4") for k in keep])
    for k in keep:
        trimmed[k] = chunk[k]
    PlyData([PlyElement.describe(trimmed, "chunk"),
             PlyElement.describe(np.array(ply["vertex"].data), "vertex")]).write(str(path))
    with pytest.raises(ValueError, match="c.ply.*chunk.*max_scale_y"):
        load_ply(path)


# ----------------------------------------------------------------------------- atomic write

def test_failed_save_leaves_existing_file_unchanged(tmp_path, monkeypatch):
    path = tmp_path / "model.ply"
    save_ply(random_gaussians(100, 2, seed=1), path)
    before = path.read_bytes()

    def broken_write(self, stream):
        stream.write(b"ply\nformat binary_little_endian 1.0\n" + b"\0" * 1000)
        raise OSError("disk full")

    monkeypatch.setattr(plyfile.PlyData, "write", broken_write)
    with pytest.raises(OSError, match="disk full"):
        save_ply(random_gaussians(100, 3, seed=2), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ply"]  # no temp file left
