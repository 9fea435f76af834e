"""csrc compiles (on a CPU machine too, given the CUDA toolkit) and agrees with constants.py.

CI sets GSEXP_REQUIRE_CUDA_BUILD=1, so a missing toolkit or a compile error fails there
instead of skipping."""

import pytest
import torch

from conftest import require_cuda_toolchain
from gsexp.render import constants, make_settings, render
from gsexp.render.cuda import CudaUnavailable, build, options_of
from gsexp.render.settings import CUDA_BACKWARDS


def compiled_extension():
    require_cuda_toolchain()
    return build.load()


def test_extension_compiles_and_mirrors_the_constants():
    ext = compiled_extension()
    assert ext.tile_size == constants.TILE_SIZE
    for name in ("near_plane", "cov2d_dilation", "fov_clamp", "alpha_max", "alpha_min", "log_alpha_min", "t_min"):
        assert getattr(ext, name) == pytest.approx(getattr(constants, name.upper()), rel=1e-6), name
    # Every option a settings object can hold has an id in the kernels' RasterOptions.
    assert set(ext.blend_ids) == set(constants.BLENDS)
    assert set(ext.precision_ids) == set(constants.PRECISIONS)
    assert set(ext.intersect_ids) == set(constants.INTERSECTS)
    assert set(ext.backward_ids) == set(CUDA_BACKWARDS)
    assert options_of(make_settings("vanilla", backward="gemm_tf32")).backward == ext.backward_ids["gemm_tf32"]
    o = ext.RasterOptions()
    assert (o.blend, o.intersect, o.heavy_first, o.timing) == (ext.blend_ids["vanilla"], ext.intersect_ids["aabb"],
                                                               True, False)
    # the issue 38 modes the kernels read reach them by name (options_of), off by default
    assert (o.antialiased, o.absgrad, o.depth) == (False, False, False)
    assert options_of(make_settings("tc_gs", depth=True)).depth and not options_of(make_settings("tc_gs")).depth
    assert o.dilation == pytest.approx(constants.COV2D_DILATION)  # rasterizer.dilation: 3DGS's 0.3 unless set
    assert options_of(make_settings("gemm_gs", dilation=0.1)).dilation == pytest.approx(0.1)
    # rasterizer.tile_split: the exact backward's blocks per tile side (0: by the tile count)
    assert o.tile_split == 1 and options_of(make_settings("tc_gs")).tile_split == 1
    assert [options_of(make_settings("tc_gs", tile_split=s)).tile_split for s in ("quarters", "auto")] == [2, 0]


def test_flags_target_hopper_with_portable_ptx():
    assert "--use_fast_math" in build.NVCC_FLAGS
    assert "-gencode=arch=compute_90a,code=sm_90a" in build.NVCC_FLAGS
    assert any(f.endswith("code=compute_90") for f in build.NVCC_FLAGS)


def test_cpu_tensors_get_an_error_naming_the_fallback():
    from render_helpers import random_scene

    g, cam = random_scene(0, n=10)
    with pytest.raises(RuntimeError, match="rasterizer=torch"):
        render(g, cam, backend="cuda")


@pytest.mark.parametrize("kw,match", [({"blend": "tcgs", "batch": 48}, "batch: 48 is not one of 32, 64, 128"),
                                      ({"precision": "fp16"}, "vanilla has no switch 'precision'")])
def test_unsupported_cuda_options_say_so(kw, match):
    from render_helpers import random_scene

    g, cam = random_scene(0, n=10)
    with pytest.raises(ValueError, match=match):
        render(g, cam, backend="cuda", **kw)


def test_missing_nvcc_names_the_fallback(monkeypatch):
    import torch.utils.cpp_extension as cpp

    monkeypatch.setattr(cpp, "CUDA_HOME", None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(build, "CUDA_HOME_GUESSES", ())
    with pytest.raises(CudaUnavailable, match="rasterizer=torch"):
        build.check_toolchain()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path")
def test_cuda_rasterizer_config_on_cpu_fails_before_work():
    from gsexp.render import make_settings
    from gsexp.train.setup import pick_device

    with pytest.raises(ValueError, match="rasterizer=torch"):
        pick_device("auto", make_settings("vanilla"))
