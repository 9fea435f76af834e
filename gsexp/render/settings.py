"""Rasterizer settings: one typed, frozen object per variant, holding only that variant's
switches, checked here and nowhere else.

    TorchSettings(blend="tcgs", precision="fp16")      # the pure-PyTorch reference
    VanillaSettings(intersect="accutile")              # the CUDA kernels
    GemmGsSettings(precision="tf32")
    TcGsSettings(early_cull=False, batch=64)

A variant is named by its config file (conf/rasterizer/<name>.yaml); `make_settings(name,
**switches)` builds one by name and `from_config` from a config node with `_target_`.
A switch the variant lacks fails with the names of the variants that have it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

from gsexp.errors import ConfigError, InvalidCombination
from gsexp.render.constants import BLENDS, COV2D_DILATION, INTERSECTS, PRECISIONS

BATCHES = (32, 64, 128)  # Gaussians per pipeline stage of the CUDA matrix blends
TILE_ORDERS = ("heavy_first", "raster")
TILE_SPLITS = ("none", "quarters", "auto")  # blocks per tile: one, four (four rows each), by tile count
# The blend backward: exact fp32, or the GEMM form with its operands in a tensor-core format
# (reference/gemm_backward.py). The CUDA kernels (csrc/backward_gemm.cu) have gemm_fp32 (dL/dpower
# as two tf32 terms) and gemm_tf32; bf16 and fp16 are studied on the reference only.
BACKWARDS = ("exact", "gemm_fp32", "gemm_tf32", "gemm_bf16", "gemm_fp16")
CUDA_BACKWARDS = ("exact", "gemm_fp32", "gemm_tf32")


def _need(ok: bool, key: str, problem: str, error=ConfigError):
    if not ok:
        raise error(f"rasterizer.{key}: {problem}", key=key, problem=problem)


def _choice(settings, key: str, options):
    value = getattr(settings, key)
    _need(value in options, key, f"{value!r} is not one of {', '.join(map(str, options))}")


@dataclass(frozen=True)
class RasterSettings:
    """What every variant has. intersect: which tiles get a Gaussian's entries (aabb: the
    3-sigma square; snugbox: the exact box of the alpha = 1/255 ellipse; accutile: only the
    tiles that ellipse touches). timing: per-stage times in `stage_ms` (costs a sync).
    tile_order: heavy_first runs the longest tile lists first (no effect on the image).
    dilation: the variance in pixels^2 added to the screen-space covariance's diagonal, a low-pass
    filter (3DGS and gsplat's eps2d: 0.3; Mip-Splatting's 2D filter: 0.1).
    antialiased: Mip-Splatting's 2D filter (gsplat's rasterize_mode="antialiased"): the opacity
    times sqrt(det S / det(S + dilation I)), S the undilated screen-space covariance.
    depth: also `out.depth` (expected depth sum w z / sum w) and `out.depth_accumulated`
    (sum w z), differentiable; every variant (the CUDA blends composite z as a fourth channel).
    absgrad: `out.means2d_absgrad`, filled by backward(): per Gaussian the sum over its pixels of
    |dL_pixel / d means2d| (AbsGS's densification statistic); the exact backward only.
    tile_split: how many blocks walk a tile's list in the CUDA exact backward and the matrix blends
    (gemm_gs, tc_gs): none (one), quarters (four, each four of the tile's rows: more SMs busy where
    an image has few tiles, as at a resolution schedule's coarse levels), auto (quarters below 4
    tiles per SM). The same image, bit for bit, and the same gradients (float atomics: their
    order); no effect on vanilla's blend nor on torch."""

    intersect: str = "aabb"
    timing: bool = False
    tile_order: str = "heavy_first"
    backward: str = "exact"
    dilation: float = COV2D_DILATION
    antialiased: bool = False
    depth: bool = False
    absgrad: bool = False
    tile_split: str = "none"

    name: ClassVar[str] = ""
    backend: ClassVar[str] = ""  # torch | cuda: the module that rasterizes it

    def __post_init__(self):
        _choice(self, "intersect", INTERSECTS)
        _choice(self, "tile_order", TILE_ORDERS)
        _choice(self, "tile_split", TILE_SPLITS)
        _choice(self, "backward", BACKWARDS)
        _need(self.backend != "cuda" or self.backward in CUDA_BACKWARDS, "backward",
              f"{self.backward!r} runs on the reference only (rasterizer=torch); the CUDA kernels "
              f"have {', '.join(CUDA_BACKWARDS)}", InvalidCombination)
        d = self.dilation
        _need(isinstance(d, (int, float)) and not isinstance(d, bool) and math.isfinite(d) and d > 0, "dilation",
              f"must be a variance in pixels^2 above 0 (3DGS: 0.3, Mip-Splatting: 0.1), got {d!r}")
        _need(self.backward == "exact" or not self.absgrad, "absgrad",
              f"absgrad needs backward=exact (the per-pixel terms), not {self.backward!r}", InvalidCombination)
        _need(self.backward == "exact" or self.tile_split == "none", "tile_split",
              f"{self.tile_split!r} splits the exact backward's tiles; backward={self.backward!r} has one block "
              "a tile (leave tile_split=none)", InvalidCombination)
        for f in dataclasses.fields(self):
            default = f.default
            if isinstance(default, bool):
                _need(isinstance(getattr(self, f.name), bool), f.name,
                      f"must be true or false, got {getattr(self, f.name)!r}")

    @property
    def formula(self) -> dict:
        """The blend formula's arguments (reference/formulas.make_formula)."""
        return {"blend": self.blend, "precision": getattr(self, "precision", "fp32"),
                "g2l": getattr(self, "g2l", True), "early_cull": getattr(self, "early_cull", True),
                "half_blend": getattr(self, "half_blend", False), "backward": self.backward}

    def replace(self, **changes) -> "RasterSettings":
        return make_settings(self.name, **{**self.switches(), **changes})

    def switches(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class TorchSettings(RasterSettings):
    """The pure-PyTorch reference (CPU or CUDA): every blend formula, precision emulated.
    half_blend (TC-GS's fp16 accumulation) is emulated for rendering only."""

    blend: str = "vanilla"
    precision: str = "fp32"
    g2l: bool = True
    early_cull: bool = True
    half_blend: bool = False

    name: ClassVar[str] = "torch"
    backend: ClassVar[str] = "torch"

    def __post_init__(self):
        super().__post_init__()
        _choice(self, "blend", BLENDS)
        _choice(self, "precision", PRECISIONS)
        # A switch the formula ignores stays at its default, so a sweep never runs one variant twice.
        b = self.blend
        _need(b != "vanilla" or self.precision == "fp32", "precision",
              "the vanilla formula is fp32; reduced precision applies to blend=gemm or tcgs", InvalidCombination)
        _need(b != "vanilla" or self.g2l, "g2l", "g2l (tile-local coordinates) applies to blend=gemm or tcgs",
              InvalidCombination)
        _need(b == "tcgs" or self.early_cull, "early_cull", f"early_cull applies to blend=tcgs only, not {b}",
              InvalidCombination)
        _need(b == "tcgs" or not self.half_blend, "half_blend",
              f"half_blend (fp16 accumulation) applies to blend=tcgs only, not {b}", InvalidCombination)


@dataclass(frozen=True)
class VanillaSettings(RasterSettings):
    """CUDA, 3DGS's fp32 blend."""

    name: ClassVar[str] = "vanilla"
    backend: ClassVar[str] = "cuda"
    blend: ClassVar[str] = "vanilla"


@dataclass(frozen=True)
class GemmGsSettings(RasterSettings):
    """CUDA, GEMM-GS: each tile's exponents as one small GEMM on the tensor cores.
    precision: operand format (fp32 runs the same dot products on CUDA cores); g2l:
    tile-centred coordinates (without them fp16 overflows); batch: Gaussians per stage."""

    precision: str = "fp16"
    g2l: bool = True
    batch: int = 128

    name: ClassVar[str] = "gemm_gs"
    backend: ClassVar[str] = "cuda"
    blend: ClassVar[str] = "gemm"

    def __post_init__(self):
        super().__post_init__()
        _choice(self, "precision", PRECISIONS)
        _choice(self, "batch", BATCHES)


@dataclass(frozen=True)
class TcGsSettings(GemmGsSettings):
    """CUDA, TC-GS: beta = ln o + power as an 8-vector GEMM; early_cull tests beta against
    ln(1/255) before any exp; half_blend holds T and colour in fp16, as TC-GS's code."""

    early_cull: bool = True
    half_blend: bool = False

    name: ClassVar[str] = "tc_gs"
    blend: ClassVar[str] = "tcgs"


VARIANTS: dict[str, type[RasterSettings]] = {
    cls.name: cls for cls in (TorchSettings, VanillaSettings, GemmGsSettings, TcGsSettings)}
_BY_TARGET = {f"{cls.__module__}.{cls.__qualname__}": cls for cls in VARIANTS.values()}


def variants_with(key: str) -> list[str]:
    return [name for name, cls in VARIANTS.items() if key in {f.name for f in dataclasses.fields(cls)}]


def make_settings(name: str, **switches) -> RasterSettings:
    """The settings of variant `name` (torch | vanilla | gemm_gs | tc_gs) with `switches`."""
    cls = VARIANTS.get(name)
    if cls is None:
        raise ConfigError(f"rasterizer: unknown variant {name!r}; available: {', '.join(VARIANTS)}", key="")
    own = {f.name for f in dataclasses.fields(cls)}
    for key in switches:
        if key not in own:
            have = variants_with(key)
            where = f"it is a switch of {', '.join(have)}" if have else "no variant has it"
            problem = f"{name} has no switch {key!r} ({where}); {name}'s switches: {', '.join(sorted(own))}"
            raise InvalidCombination(f"rasterizer.{key}: {problem}", key=key, problem=problem)
    return cls(**switches)


def implied(cls: type[RasterSettings], key: str):
    """The value a variant behaves as having for a switch it lacks (vanilla is fp32, ...)."""
    return {"blend": getattr(cls, "blend", None), "precision": "fp32", "g2l": True, "early_cull": True,
            "half_blend": False, "batch": 128}.get(key, _MISSING)


_MISSING = object()


def from_config(node, sweep: bool = False) -> RasterSettings:
    """Settings from a config mapping with `_target_` (a class of this module).

    In a sweep that crosses variants with switches, a switch the variant lacks set to the
    value the variant implies (vanilla x precision=fp32) is dropped, so that variant runs once;
    any other value fails as an invalid combination, as it does outside sweeps."""
    values = dict(node)
    target = values.pop("_target_", None)
    cls = _BY_TARGET.get(target)
    if cls is None:
        raise ConfigError(f"rasterizer._target_: {target!r} is not a rasterizer settings class; "
                          f"available: {', '.join(_BY_TARGET)}", key="_target_")
    if sweep:
        own = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in values.items() if k in own or implied(cls, k) != v}
    return make_settings(cls.name, **values)


def from_keywords(backend: str = "torch", blend: str = "vanilla", **switches) -> RasterSettings:
    """The plain-keyword form of render(): backend + blend pick the variant."""
    if backend == "torch":
        return make_settings("torch", blend=blend, **switches)
    names = {"vanilla": "vanilla", "gemm": "gemm_gs", "tcgs": "tc_gs"}
    if backend != "cuda" or blend not in names:
        raise ConfigError(f"render: backend must be torch or cuda and blend one of {', '.join(names)}, "
                          f"got backend={backend!r}, blend={blend!r}", key="")
    return make_settings(names[blend], **switches)


def _shared_switches(settings: RasterSettings) -> dict:
    """The switches every variant has (RasterSettings' fields), as `settings` sets them."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(RasterSettings)}


def counting_settings(settings: RasterSettings) -> VanillaSettings:
    """Vanilla's blend on `settings`' preprocess and tile sets, what the CUDA hit counts run: every
    switch all variants share, less the per-call outputs (timing, depth, absgrad)."""
    return VanillaSettings(**{**_shared_switches(settings), "timing": False, "depth": False, "absgrad": False,
                              "backward": "exact"})


def reference_of(settings: RasterSettings) -> TorchSettings:
    """The reference settings that compute what `settings` computes (for parity checks): every
    shared switch, and the blend formula's arguments."""
    return TorchSettings(**{**_shared_switches(settings), **settings.formula})
