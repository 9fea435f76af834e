"""The viewer's panel: rasterizer, intersect mode, channel (colour or depth), resolution, SH
bands, and the stats line.
Every choice becomes a settings object of gsexp/render/settings.py; the panel knows nothing
of how a variant renders."""
from __future__ import annotations

import dataclasses

from gsexp.bench.rasterizers import parse_rasterizer
from gsexp.render.constants import INTERSECTS
from gsexp.render.settings import RasterSettings, from_config

# The reference's formulas run anywhere; the CUDA kernels only where there is a GPU.
REFERENCE_SPECS = ("torch", "torch:blend=gemm", "torch:blend=tcgs:precision=fp16")
CUDA_SPECS = ("vanilla", "gemm_gs", "tc_gs")
LABEL_PRIORITY = ("preprocess", "duplicate", "sort", "ranges", "blend")


def spec_of(settings: RasterSettings) -> str:
    """'tc_gs:precision=tf32': the variant and the switches that differ from its defaults
    (intersect and timing are the panel's own)."""
    defaults = type(settings)()
    parts = [f"{f.name}={getattr(settings, f.name)}".replace("True", "true").replace("False", "false")
             for f in dataclasses.fields(settings)
             if f.name not in ("intersect", "timing") and getattr(settings, f.name) != getattr(defaults, f.name)]
    return ":".join([settings.name, *parts])


def rasterizer_specs(cuda: bool, run_rasterizer: dict | None = None) -> tuple[list[str], str]:
    """The specs the dropdown offers and the one to start on: the run's own when it can run
    here, else tc_gs on a GPU and the reference without one."""
    specs = list(REFERENCE_SPECS) + (list(CUDA_SPECS) if cuda else [])
    start = "tc_gs" if cuda else "torch"
    if run_rasterizer:
        try:
            own = from_config(run_rasterizer)
        except ValueError:
            own = None
        if own is not None and (cuda or own.backend == "torch"):
            start = spec_of(own)
            if start not in specs:
                specs.insert(0, start)
    return specs, start


class Controls:
    """The GUI elements; `version` changes whenever a choice does (the render loop redraws)."""

    def __init__(self, gui, specs: list[str], start: str, *, height: int, sh_degree: int, intersect: str = "aabb"):
        self.version = 0
        with gui.add_folder("Render"):
            self.rasterizer = gui.add_dropdown("Rasterizer", specs, initial_value=start,
                                               hint="settings object of gsexp/render/settings.py")
            self.intersect = gui.add_dropdown("Intersect", list(INTERSECTS), initial_value=intersect,
                                              hint="tiles a Gaussian's entries go to")
            self.channel = gui.add_dropdown("Channel", ["rgb", "depth"], initial_value="rgb",
                                            hint="depth: expected depth, near red to far blue (2-98 % of the frame)")
            self.height = gui.add_slider("Height (px)", min=64, max=2160, step=8, initial_value=height,
                                         hint="render height; the width follows the window")
            self.sh_degree = gui.add_slider("SH degree", min=0, max=max(sh_degree, 0), step=1,
                                            initial_value=sh_degree, disabled=sh_degree == 0)
        self.stats = gui.add_markdown("waiting for the first frame")
        for handle in (self.rasterizer, self.intersect, self.channel, self.height, self.sh_degree):
            handle.on_update(self._changed)

    def _changed(self, _event) -> None:
        self.version += 1

    def settings(self) -> RasterSettings:
        settings = parse_rasterizer(self.rasterizer.value).settings
        return settings.replace(intersect=self.intersect.value, timing=True, depth=self.channel.value == "depth")

    def show(self, stats: dict) -> None:
        self.stats.content = stats_text(stats)


def stats_text(s: dict) -> str:
    """The on-screen report: variant, size, frame time and FPS, per-stage ms, counts."""
    if "error" in s:
        return f"**{s['rasterizer']}** failed: {s['error']}"
    stages = sorted(s["stage_ms"].items(),
                    key=lambda kv: LABEL_PRIORITY.index(kv[0]) if kv[0] in LABEL_PRIORITY else 99)
    stage_line = " · ".join(f"{k} {v:.2f}" for k, v in stages) or "no stage times"
    channel = " · depth {:.3g} (red) to {:.3g} (blue)".format(*s["depth_range"]) if "depth_range" in s else ""
    return (f"**{s['rasterizer']}** · intersect {s['intersect']} · {s['width']}×{s['height']} · {s['device']}"
            f"{channel}  \n"
            f"**{s['fps']:.1f} FPS** · frame {s['frame_ms']:.1f} ms · render {s['render_ms']:.2f} ms  \n"
            f"stages (ms): {stage_line}  \n"
            f"{s['gaussians']:,} Gaussians · {s['pairs']:,} pairs")
