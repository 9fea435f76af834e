"""Experiment tracking: local files always, W&B on request (offline unless $WANDB_MODE says otherwise)."""
from __future__ import annotations

from gsexp.track.base import Logger, MultiLogger, run_name_from_overrides, tags_from_choices
from gsexp.track.local import LocalLogger
from gsexp.track.wandb import WandbLogger

LOGGER_KINDS = ("wandb", "none")


def make_logger(kind: str, run_dir, **kwargs) -> Logger:
    """kind "wandb": local files + a W&B run (kwargs go to WandbLogger); "none": local files only
    (kwargs are ignored, so callers can pass the same ones either way)."""
    if kind == "wandb":
        return MultiLogger(LocalLogger(run_dir), WandbLogger(run_dir, **kwargs))
    if kind == "none":
        return LocalLogger(run_dir)
    raise ValueError(f"unknown logger kind {kind!r}; choose one of {', '.join(LOGGER_KINDS)}")


__all__ = ["Logger", "LocalLogger", "WandbLogger", "MultiLogger", "make_logger", "LOGGER_KINDS",
           "run_name_from_overrides", "tags_from_choices"]
