"""Rasterizer specs and the bench's handle on a rasterizer.

A spec is `variant[:key=value]...`: variant is a name of gsexp.render.settings.VARIANTS
(torch, vanilla, gemm_gs, tc_gs) or a peer (`gsplat`; `gsplat_higs`, main's inference renderer); keys are that variant's settings,
plus `sh_degree` (the SH bands to render, a bench key). Values: true/false, numbers, text.
    tc_gs:intersect=accutile    torch:blend=tcgs:precision=fp16    gemm_gs:batch=64:sh_degree=0
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gsexp.render import render
from gsexp.render.settings import VARIANTS, RasterSettings, make_settings

PEER = "gsplat"  # the peer the bench adds by itself
PEERS = (PEER, "gsplat_higs")
BENCH_KEYS = ("sh_degree",)  # handled by the bench, not part of the rasterizer settings


@dataclass
class Rasterizer:
    name: str
    render: Callable  # (camera, timing: bool) -> (image [3,H,W], stage_ms dict)
    settings: dict = field(default_factory=dict)  # what the JSON records
    has_stages: bool = True
    pairs: list = field(default_factory=list)  # (tile, Gaussian) pairs of each render, when known


@dataclass(frozen=True)
class Spec:
    text: str
    variant: str
    settings: RasterSettings | None  # None: the peer
    sh_degree: int | None = None

    def record(self) -> dict:
        switches = self.settings.switches() if self.settings else {}
        backend = self.settings.backend if self.settings else self.variant
        extra = {} if self.sh_degree is None else {"sh_degree": self.sh_degree}
        return {"variant": self.variant, "backend": backend, **switches, **extra}


def parse_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_rasterizer(text: str) -> Spec:
    """'tc_gs:precision=fp16:sh_degree=1' -> Spec(settings=TcGsSettings(precision='fp16'), sh_degree=1).
    Raises ValueError (the settings module's ConfigError is one) naming what is wrong."""
    variant, *parts = text.strip().split(":")
    if variant not in PEERS and variant not in VARIANTS:
        raise ValueError(f"unknown rasterizer {variant!r}; available: {', '.join([*VARIANTS, *PEERS])}")
    switches, extra = {}, {}
    for part in parts:
        if "=" not in part:
            raise ValueError(f"{part!r} is not key=value (a spec is variant[:key=value]...)")
        key, value = part.split("=", 1)
        (extra if key in BENCH_KEYS else switches)[key] = parse_value(value)
    if variant in PEERS:
        if switches:
            raise ValueError(f"{variant} takes no settings but {', '.join(BENCH_KEYS)}, got {', '.join(switches)}")
        return Spec(text, variant, None, **extra)
    return Spec(text, variant, make_settings(variant, **switches), **extra)


def gsexp_rasterizer(spec: Spec | str, g, background) -> Rasterizer:
    """render() with the spec's settings; `timing` renders ask for stage times."""
    spec = parse_rasterizer(spec) if isinstance(spec, str) else spec
    plain = spec.settings
    timed = plain if plain.timing else plain.replace(timing=True)

    def run(camera, timing):
        out = render(g, camera, timed if timing else plain, background=background, sh_degree=spec.sh_degree)
        r.pairs.append(out.num_pairs)
        return out.image, out.stage_ms

    r = Rasterizer(spec.text, run, spec.record())
    return r


def make_rasterizer(spec: Spec | str, g, background) -> Rasterizer:
    spec = parse_rasterizer(spec) if isinstance(spec, str) else spec
    if spec.variant in PEERS:
        from gsexp.bench import peers

        return getattr(peers, f"{spec.variant}_rasterizer")(g, background, spec.sh_degree)
    return gsexp_rasterizer(spec, g, background)
