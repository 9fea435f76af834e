"""Weights & Biases logging. wandb is imported only when a WandbLogger is made, so the rest of
gsexp (and `import gsexp.track`) works without loading it."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from gsexp.comparison import to_uint8
from gsexp.track.base import Logger, to_number, to_plain


def resolve_mode(mode: str = "offline") -> str:
    """$WANDB_MODE, when set, wins over the code's mode, so a user can go online without edits."""
    return os.environ.get("WANDB_MODE") or mode


class WandbLogger(Logger):
    """One W&B run whose files live in run_dir/wandb/ (offline runs: `wandb sync` them later)."""

    def __init__(self, run_dir, *, project: str = "gsexp", mode: str = "offline", group: str | None = None,
                 name: str | None = None, tags=(), config: dict | None = None, job_type: str = "train"):
        import wandb

        self._wandb = wandb
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        # reinit="create_new": each logger owns its run (a Hydra multirun makes several in one
        # process); that run is not wandb.run, so everything below goes through self.run.
        self.run = wandb.init(
            dir=str(run_dir), mode=resolve_mode(mode), project=project, group=group, name=name,
            tags=[t[:64] for t in tags if t],  # W&B refuses empty tags and tags over 64 characters
            config=config, job_type=job_type, reinit="create_new",
        )
        self._finished = False

    def log(self, metrics: dict, step: int) -> None:
        self.run.log({k: to_number(k, v) for k, v in metrics.items()}, step=int(step))

    def log_image(self, key: str, image: torch.Tensor, step: int) -> None:
        self.run.log({key: self._wandb.Image(to_uint8(image))}, step=int(step))

    def summary(self, values: dict) -> None:
        self.run.summary.update(to_plain(values))

    def finish(self, status: str = "ok") -> None:
        if not self._finished:
            self._finished = True
            self.run.finish(exit_code=0 if status == "ok" else 1)
