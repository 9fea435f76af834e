"""Sweeps: one table of every job's results, the sweep callback, and the GPU pool."""
from gsexp.sweep.results import collect, write_csv, write_markdown

__all__ = ["collect", "write_csv", "write_markdown"]
