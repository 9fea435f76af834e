"""The logger interface, a fan-out logger, value conversion and run naming helpers."""
from __future__ import annotations

import hashlib
import math
import numbers
import re
from collections.abc import Mapping

import numpy as np
import torch


class Logger:
    """Experiment logger. Subclasses override what they support; all methods default to no-ops.

    As a context manager it calls finish("ok"), or finish("error") when the block raised.
    """

    def log(self, metrics: dict, step: int) -> None:
        pass

    def log_image(self, key: str, image: torch.Tensor, step: int) -> None:
        pass

    def summary(self, values: dict) -> None:
        pass

    def rewind(self, step: int) -> None:
        """A run resumed from the checkpoint at `step`: forget what was logged after it."""

    def finish(self, status: str = "ok") -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish("ok" if exc_type is None else "error")


class MultiLogger(Logger):
    """Sends every call to each logger in order."""

    def __init__(self, *loggers: Logger):
        self.loggers = list(loggers)

    def log(self, metrics: dict, step: int) -> None:
        for lg in self.loggers:
            lg.log(metrics, step)

    def log_image(self, key: str, image: torch.Tensor, step: int) -> None:
        for lg in self.loggers:
            lg.log_image(key, image, step)

    def summary(self, values: dict) -> None:
        for lg in self.loggers:
            lg.summary(values)

    def rewind(self, step: int) -> None:
        for lg in self.loggers:
            lg.rewind(step)

    def finish(self, status: str = "ok") -> None:
        # Finish every logger even if one fails, so no run is left dangling.
        errors = []
        for lg in self.loggers:
            try:
                lg.finish(status)
            except Exception as e:  # noqa: BLE001 - re-raised below
                errors.append(e)
        if errors:
            raise errors[0]


def to_number(key: str, value) -> int | float:
    """A metric value as a Python int or float (one-element tensors and numpy scalars included)."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(f"metric {key!r}: expected a scalar, got a tensor of shape {tuple(value.shape)}")
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"metric {key!r}: expected an int or float, got {type(value).__name__}")


def json_number(x: int | float) -> int | float | str:
    """JSON has no NaN/inf: write them as "nan"/"inf"/"-inf" (float() reads them back)."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def to_plain(value, nonfinite_as_str: bool = False):
    """A summary value as plain Python (dicts, lists, str, int, float, bool, None), tensors and
    numpy values included; anything else becomes its str() rather than losing the summary."""
    if isinstance(value, (torch.Tensor, np.ndarray, np.generic)):
        value = value.tolist()
    if isinstance(value, Mapping):
        return {str(k): to_plain(v, nonfinite_as_str) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, nonfinite_as_str) for v in value]
    if isinstance(value, float):
        return json_number(value) if nonfinite_as_str else value
    if value is None or isinstance(value, (str, int)):
        return value
    return str(value)


def safe_name(text: str) -> str:
    """Keep letters, digits and . , = + - _; anything else (/, spaces, ...) becomes '_'."""
    return re.sub(r"[^A-Za-z0-9.,=+_-]", "_", text)


def run_name_from_overrides(overrides: list[str], max_len: int = 120) -> str:
    """A run name from Hydra task overrides: ["rasterizer=tcgs", "iterations=100"] ->
    "rasterizer=tcgs,iterations=100"; no overrides -> "default". hydra.* overrides are left out
    (they change where and how Hydra runs, not the experiment). Names longer than max_len are
    cut and given a short hash so they stay unique and usable as a folder name."""
    # "++rasterizer.x=v" (train.py forces switches in) names the run as "rasterizer.x=v".
    kept = [o.removeprefix("++") for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    if not kept:
        return "default"
    name = safe_name(",".join(kept))
    if len(name) > max_len:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[:max_len - 9]}-{digest}"
    return name


def tags_from_choices(choices: dict) -> list[str]:
    """Tags "group:option" from hydra.runtime.choices, without Hydra's own groups and unset ones."""
    return [f"{group}:{option}" for group, option in choices.items()
            if option is not None and group != "hydra" and not group.startswith("hydra/")]
