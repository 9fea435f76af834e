"""Ground truth | render | error map, side by side: what gsexp.eval and the trainer's final
evaluation write per view. The error map is mean_c |render - gt| times ERROR_GAIN, clamped to
[0, 1] (full scale: an error of 0.25, 64 of 255 levels), through a black-red-yellow-white
("hot") colour map: black is exact."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

ERROR_GAIN = 4.0  # error map: |render - gt| * 4, clamped to 1
CAPTION = ("ground truth | render | error; error = mean_c |render - gt| x 4 clamped to [0, 1], "
           "black-red-yellow-white")


def error_map(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """[3, H, W]: mean_c |img - ref| * ERROR_GAIN clamped to [0, 1], as black-red-yellow-white."""
    t = ((img - ref).abs().mean(0) * ERROR_GAIN).clamp(0, 1)
    return torch.stack([(3 * t).clamp(0, 1), (3 * t - 1).clamp(0, 1), (3 * t - 2).clamp(0, 1)])


def to_uint8(image: torch.Tensor) -> np.ndarray:
    """A [3, H, W] image in [0, 1] (NaN as 0, clamped) as an [H, W, 3] uint8 array, rounded."""
    if image.ndim != 3 or image.shape[0] != 3:
        raise ValueError(f"expected an image of shape [3,H,W], got {tuple(image.shape)}")
    img = image.detach().float().nan_to_num(0.0).clamp(0.0, 1.0)
    return np.ascontiguousarray((img * 255.0).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy())


def save_png(path: Path, image: torch.Tensor) -> None:
    """A [3, H, W] image in [0, 1] as an 8-bit PNG."""
    from PIL import Image

    Image.fromarray(to_uint8(image)).save(path)


def save_comparison(path: Path, ref: torch.Tensor, img: torch.Tensor) -> None:
    """ground truth | render | error map, side by side, as an 8-bit PNG."""
    save_png(path, torch.cat([ref, img, error_map(img, ref)], dim=2))


class BackgroundWriter:
    """Image writes off the render loop: PNG compression (zlib) releases the GIL, so a few
    threads write a test split's images while the next views render. A 2400x800 comparison takes
    ~0.35 s to compress, which made writing, not rendering, the cost of a 25-view GPU evaluation.
    Leaving the block waits for every write and raises the first failure."""

    def __init__(self, workers: int | None = None):
        self.pool = ThreadPoolExecutor(workers or min(8, os.cpu_count() or 1))
        self.pending = []

    def submit(self, fn, *args) -> None:
        self.pending.append(self.pool.submit(fn, *args))

    def __enter__(self) -> "BackgroundWriter":
        return self

    def __exit__(self, *exc) -> None:
        try:
            for done in self.pending:
                done.result()
        finally:
            self.pool.shutdown()
