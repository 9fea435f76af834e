"""What gsexp.prepare shows while it works: a tqdm bar per stage on a terminal, else plain lines
(the first, at most one every `every_seconds`, and the last), as the trainer's progress does.

    [prepare] features 8/71 (11%) | 3.4 s
    [prepare] features 71/71 done in 30.1 s
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

from gsexp.train.progress import format_duration, is_tty

PREFIX = "[prepare]"


class Stage:
    """One step of the pipeline with `total` units (images); advance() after each, done() at the end."""

    def __init__(self, name: str, total: int, stream: TextIO, every_seconds: float, quiet: bool):
        self.name, self.total, self.stream = name, int(total), stream
        self.every_seconds, self.quiet = every_seconds, quiet
        self.count, self.started = 0, time.monotonic()
        self.last_line = self.started
        self.bar = None
        if quiet:
            return
        if is_tty(stream):
            self.bar = tqdm(total=self.total, desc=f"{PREFIX} {name}", file=stream, dynamic_ncols=True)
        else:
            self.line(f"{self.name} 0/{self.total}")

    def line(self, text: str) -> None:
        print(f"{PREFIX} {text}", file=self.stream, flush=True)

    def advance(self, n: int = 1) -> None:
        self.count = min(self.total, self.count + n)
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.monotonic()
        if now - self.last_line >= self.every_seconds and self.count < self.total:
            self.last_line = now
            self.line(f"{self.name} {self.count}/{self.total} ({100 * self.count / max(self.total, 1):.0f}%)"
                      f" | {format_duration(now - self.started)}")

    def done(self, note: str = "") -> float:
        """Close the stage; returns its seconds."""
        seconds = time.monotonic() - self.started
        if self.bar is not None:
            self.bar.close()
        if not self.quiet:
            self.line(f"{self.name} {self.count}/{self.total} done in {seconds:.1f} s{f' ({note})' if note else ''}")
        return seconds


class Display:
    """Makes the stages; stream defaults to stdout, quiet=True shows nothing."""

    def __init__(self, stream: TextIO | None = None, every_seconds: float = 5.0, quiet: bool = False):
        self.stream = sys.stdout if stream is None else stream
        self.every_seconds, self.quiet = every_seconds, quiet

    def stage(self, name: str, total: int) -> Stage:
        return Stage(name, total, self.stream, self.every_seconds, self.quiet)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(f"{PREFIX} {text}", file=self.stream, flush=True)
