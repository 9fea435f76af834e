"""Training progress that shows up wherever the output goes.

On a terminal: a tqdm bar (postfix loss, psnr, G). Otherwise (nohup, SLURM, tee, CI, where tqdm
with disable=None prints nothing): a plain line at the first step, at most every `every_seconds`
after that, and at the last step,

    step 1200/30000 (4.0%) | 38.1 it/s | ETA 12:34 | loss 0.0312 | train PSNR 27.41 | 123,456 Gaussians

written to `stream` (flushed) and to the `gsexp.train` logger, which Hydra's job logging sends
to <run dir>/train.log. Under Hydra that logger's console handler already writes to stdout, so
then the line is not written to the stream a second time.

update() takes Python numbers the caller already holds (it reads the loss only on log steps):
no tensor, so no GPU sync. it/s is over the steps since the previous line. The ETA is smoothed:
its rate counts the steps and seconds of the last two minutes or so (older lines fade exponentially),
so one slow interval on a busy machine barely moves it, while a lasting change shows within a
few minutes; the first interval (one-off start costs: CUDA context, kernel loads) is left out.
The evaluation's progress uses the same lines: what="eval view", unit="view".
"""
from __future__ import annotations

import logging
import math
import sys
import time
from typing import Callable, TextIO

from tqdm import tqdm

LOGGER = "gsexp.train"


def format_duration(seconds: float) -> str:
    """12:34, or 1:02:03 from an hour on."""
    seconds = max(int(seconds + 0.5), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def logger_writes_to(log: logging.Logger, stream, level: int = logging.INFO) -> bool:
    """Whether a record of `level` on `log` reaches a console handler that writes to `stream`
    (Hydra's job logging: a StreamHandler on sys.stdout on the root logger)."""
    if not log.isEnabledFor(level):
        return False
    current: logging.Logger | None = log
    while current is not None:
        for handler in current.handlers:
            if (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
                    and getattr(handler, "stream", None) is stream and handler.level <= level):
                return True
        if not current.propagate:
            break
        current = current.parent
    return False


class Progress:
    """Progress of steps start..total. update(step) after each step, with step the number of
    steps done (run.start + 1 after the first one); close() at the end."""

    def __init__(self, total: int, start: int = 0, every_seconds: float = 5.0, stream: TextIO | None = None,
                 log: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic,
                 what: str = "step", unit: str = "it", window: float = 120.0):
        self.total, self.start, self.every_seconds = int(total), int(start), float(every_seconds)
        self.what, self.unit, self.window = what, unit, float(window)
        self.recent_steps = self.recent_seconds = 0.0  # the ETA's rate: sums fading over `window` seconds
        self.stream = sys.stdout if stream is None else stream
        self.log = logging.getLogger(LOGGER) if log is None else log
        self.clock = clock
        self.step = self.start
        self.loss: float | None = None
        self.psnr: float | None = None
        self.num_gaussians: int | None = None
        self.bar = None
        if is_tty(self.stream):
            self.bar = tqdm(total=self.total, initial=self.start, file=self.stream, dynamic_ncols=True, unit=unit,
                            desc=None if what == "step" else what, leave=what == "step")
        self.last_step, self.last_time = self.start, clock()
        self.lines = 0

    def update(self, step: int, loss: float | None = None, psnr: float | None = None,
               num_gaussians: int | None = None) -> None:
        """`step` steps done; loss / psnr / num_gaussians when the caller has them (else the last known)."""
        self.step = step
        fresh = {}
        if loss is not None:
            self.loss = fresh["loss"] = float(loss)
        if psnr is not None:
            self.psnr = fresh["psnr"] = float(psnr)
        if num_gaussians is not None:
            self.num_gaussians = fresh["num_gaussians"] = int(num_gaussians)
        if self.bar is not None:
            if fresh:
                self.bar.set_postfix(self.postfix(), refresh=False)
            self.bar.update(step - self.bar.n)
            return
        now = self.clock()
        if self.lines == 0 or step >= self.total or now - self.last_time >= self.every_seconds:
            self.emit(now)

    def postfix(self) -> dict:
        out = {}
        if self.loss is not None:
            out["loss"] = f"{self.loss:.4f}"
        if self.psnr is not None:
            out["psnr"] = f"{self.psnr:.2f}"
        if self.num_gaussians is not None:
            out["G"] = self.num_gaussians
        return out

    def line(self, rate: float | None, eta_rate: float | None) -> str:
        remaining = max(self.total - self.step, 0)
        if rate is None:
            speed = f"? {self.unit}/s"
        else:
            speed = f"{rate:.1f} {self.unit}/s" if rate >= 1 else f"{1 / rate:.2f} s/{self.unit}"
        eta = format_duration(remaining / eta_rate) if eta_rate else "?" if remaining else format_duration(0)
        percent = 100.0 * self.step / self.total if self.total else 100.0
        fields = [f"{self.what} {self.step}/{self.total} ({percent:.1f}%)", speed, f"ETA {eta}"]
        if self.loss is not None:
            fields.append(f"loss {self.loss:.4f}")
        if self.psnr is not None:
            fields.append(f"train PSNR {self.psnr:.2f}")
        if self.num_gaussians is not None:
            fields.append(f"{self.num_gaussians:,} Gaussians")
        return " | ".join(fields)

    def emit(self, now: float) -> None:
        steps, seconds = self.step - self.last_step, now - self.last_time
        rate = steps / seconds if steps > 0 and seconds > 0 else None
        if self.lines and seconds > 0:  # not the first interval: it holds the one-off start
            fade = math.exp(-seconds / self.window)
            self.recent_steps = self.recent_steps * fade + steps
            self.recent_seconds = self.recent_seconds * fade + seconds
        smoothed = self.recent_steps / self.recent_seconds if self.recent_steps > 0 else None
        text = self.line(rate, smoothed or rate)
        if not logger_writes_to(self.log, self.stream):
            self.stream.write(text + "\n")
            self.stream.flush()
        self.log.info(text)
        self.last_step, self.last_time = self.step, now
        self.lines += 1

    def close(self) -> None:
        """Closes the bar; without one, a last line when steps were done since the previous one
        (a loop left early)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.step > self.last_step:
            self.emit(self.clock())

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
