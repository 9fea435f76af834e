"""Timing: end-to-end frames between CUDA events, stage times from a separate pass, rounds
that interleave the rasterizers."""
from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
import torch


def timed(fn, device: torch.device):
    """(result, milliseconds) of fn(); on CUDA between events recorded around the call."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)  # earlier work (warm-up) must not overlap this frame
        start.record()
        result = fn()
        end.record()
        torch.cuda.synchronize(device)
        return result, start.elapsed_time(end)
    start = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - start) * 1e3


def summary(values) -> dict:
    return {"median": float(np.median(values)), "p90": float(np.percentile(values, 90))}


def bench_one(r, cameras, warmup: int, frames: int, device, samples=None) -> dict:
    """Time r on every camera; `samples` (the dict an earlier round returned) gathers rounds."""
    samples = samples or {"e2e": [], "stages": defaultdict(list), "images": [], "mem": 0}
    e2e, stages, images = samples["e2e"], samples["stages"], []
    if device.type == "cuda":  # the memory a frame takes beyond what is held before it
        torch.cuda.synchronize(device)
        held = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    for cam in cameras:
        for _ in range(warmup):
            r.render(cam, False)
        for _ in range(frames):
            (image, stage_ms), ms = timed(lambda: r.render(cam, False), device)
            e2e.append(ms)
            for name, v in stage_ms.items():
                stages[name].append(v)
        # Stage times (a sync per stage) come from their own pass, so that they never
        # inflate the end-to-end figures.
        if r.has_stages and not stage_ms:
            for _ in range(frames):
                for name, v in r.render(cam, True)[1].items():
                    stages[name].append(v)
        images.append(image.float().cpu())
    samples["images"] = images
    if device.type == "cuda":
        samples["mem"] = max(samples["mem"], torch.cuda.max_memory_allocated(device) - held)
    return samples


def bench_all(rasterizers, cameras, warmup: int, frames: int, device, rounds: int = 1) -> list[dict]:
    """Rounds interleave the rasterizers (A B C, A B C, ...), so that a drift of the GPU's clocks
    during the run spreads over all of them instead of biasing the ratios."""
    samples = [None] * len(rasterizers)
    for _ in range(rounds):
        for i, r in enumerate(rasterizers):
            samples[i] = bench_one(r, cameras, warmup, frames, device, samples[i])
    return [{"name": r.name, "settings": r.settings, "images": s["images"], "frames": len(s["e2e"]),
             "stages": {k: summary(v) for k, v in s["stages"].items()}, "e2e": summary(s["e2e"]),
             "pairs": float(np.mean(r.pairs)) if r.pairs else None,
             "frame_mem_mib": s["mem"] / 2**20 if device.type == "cuda" else None}
            for r, s in zip(rasterizers, samples)]
