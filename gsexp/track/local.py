"""Plain-file logging into the run folder; always on, so every run is readable without W&B."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch

from gsexp.comparison import save_png
from gsexp.track.base import Logger, json_number, safe_name, to_number, to_plain


class LocalLogger(Logger):
    """run_dir/metrics.jsonl (one line per log call), run_dir/renders/<key>_<step>.png and
    run_dir/summary.json (merged across summary calls, and across processes on resume).
    finish() has nothing to do: recording a run's status is the caller's policy."""

    def __init__(self, run_dir):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.summary_path = self.run_dir / "summary.json"

    def log(self, metrics: dict, step: int) -> None:
        if "step" in metrics:
            raise ValueError("'step' is reserved in metrics.jsonl; pass it as the step argument")
        row = {"step": int(step)}
        row.update({k: json_number(to_number(k, v)) for k, v in metrics.items()})
        # Open per call and flush: a crashed run keeps every line written so far.
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, allow_nan=False) + "\n")

    def rewind(self, step: int) -> None:
        """Drop the rows a killed attempt logged after its last checkpoint (at `step`): the
        training rows of steps >= step (step `step` ran after that checkpoint), and every row
        past it (an evaluation at `step` ran before the checkpoint and stays)."""
        if not self.metrics_path.exists():
            return
        kept = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            after = row["step"] > step or (row["step"] == step and any(k.startswith("train/") for k in row))
            if not after:
                kept.append(line)
        tmp = self.metrics_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        os.replace(tmp, self.metrics_path)

    def log_image(self, key: str, image: torch.Tensor, step: int) -> None:
        path = self.run_dir / "renders" / f"{safe_name(key)}_{int(step):06d}.png"
        path.parent.mkdir(exist_ok=True)
        save_png(path, image)

    def summary(self, values: dict) -> None:
        merged = json.loads(self.summary_path.read_text()) if self.summary_path.exists() else {}
        merged.update(to_plain(values, nonfinite_as_str=True))
        # Temp file + os.replace: readers never see a half-written summary.json.
        fd, tmp = tempfile.mkstemp(dir=self.run_dir, prefix=".summary.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(merged, f, indent=2, allow_nan=False)
            os.replace(tmp, self.summary_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
