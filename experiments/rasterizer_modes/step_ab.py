"""Issue 38's "cost when off": lego_fast's training step before the modes against now, A/B on one
checkpoint (tools/profile_step.py's free-running step, in alternating processes).

    python experiments/rasterizer_modes/step_ab.py config RUN CONF_DIR COPY

`config` runs under the version whose conf/ is CONF_DIR (the source from before the modes first
on PYTHONPATH) and makes COPY: RUN's checkpoints (linked) with the config that version composes
from RUN's own overrides, since its settings refuse the keys added since (rasterizer.dilation...).
Then `python tools/profile_step.py COPY` under that version and `... RUN` under the checkout,
alternately (defaults_unchanged.sh's `step`).
"""
from __future__ import annotations

import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf


def copy_for(run: Path, conf_dir: Path, copy: Path) -> None:
    overrides = [o for o in OmegaConf.load(run / ".hydra" / "overrides.yaml")
                 if not o.startswith(("hydra.", "resume="))]
    with initialize_config_dir(str(conf_dir.resolve()), version_base=None):
        cfg = compose("train", overrides)
    (copy / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, copy / ".hydra" / "config.yaml")
    for name in ("checkpoints", "point_cloud.ply"):
        link = copy / name
        if not link.exists():
            link.symlink_to((run / name).resolve())
    print(f"{copy}: {run}'s checkpoints, the config composed from {conf_dir} with {' '.join(overrides)}")


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "config":
        sys.exit(__doc__.split("\n\n")[1])
    copy_for(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
