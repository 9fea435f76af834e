"""What the `python -m gsexp.<tool>` command lines share."""
from __future__ import annotations

import argparse
import sys


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit 2 (argparse prints its whole usage first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def join_up_value(argv: list[str] | None) -> list[str]:
    """['--up', '-y'] -> ['--up=-y']: argparse would take '-y' for an option, not --up's value."""
    argv = sys.argv[1:] if argv is None else list(argv)
    out, i = [], 0
    while i < len(argv):
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if argv[i] == "--up" and nxt.startswith("-") and not nxt.startswith("--"):
            out.append(f"--up={nxt}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out
