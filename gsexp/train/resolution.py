"""The training-resolution schedule (schedule.resolution; DashGaussian, Chen et al. CVPR 2025):
early steps render and compare at a fraction of the image size, with the camera scaled to it
(fewer pixels, fewer tile pairs), rising to full resolution by a set step.

`auto` derives the levels' start steps from the training images' spectra: a step's share of the
ramp is the share of the images' spectral amplitude that the resolution can hold, so a level
lasts as long as the detail it adds is worth. The measure: the amplitude spectrum of the grey
images, mean removed, summed over the frequencies an image of the level's size holds (|fx| and
|fy| up to its Nyquist frequency). Natural images fall as
1/frequency, so the share is about 1/downscale and a 4x level takes about a quarter of the ramp.
`manual` takes the levels and their start steps as given (for a 30k-step run, scaled to
`iterations` as the strategies' steps are). A pure function of the step: resuming is exact.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import torch

from gsexp.scene.images import resize_area
from gsexp.schedule import REFERENCE_ITERATIONS

MODES = ("none", "auto", "manual")


@dataclass(frozen=True)
class ResolutionSchedule:
    starts: tuple[int, ...]       # the step each level starts at, ascending, the first 0
    downscales: tuple[float, ...]  # each level's image-size divisor, the last 1

    def downscale(self, step: int) -> float:
        return self.downscales[bisect.bisect_right(self.starts, step) - 1]

    def view(self, camera, image: torch.Tensor, step: int):
        """(camera, target) for `step`: both at the level's size (area-averaged target)."""
        d = self.downscale(step)
        if d == 1:
            return camera, image
        small = camera.scaled(1 / d)
        return small, resize_area(image, small.width, small.height)

    def first_step_finer_than(self, downscale: float) -> int:
        """The first step that trains at a divisor under `downscale` (the last level starts one)."""
        return next(s for s, d in zip(self.starts, self.downscales) if d < downscale)

    def describe(self) -> str:
        return ", ".join(f"1/{d:g} from step {s}" for s, d in zip(self.starts, self.downscales))


def amplitude_share(images, downscales, max_images: int = 16) -> list[float]:
    """For each downscale, the share of the images' spectral amplitude (DC removed) below its
    Nyquist frequency, averaged over up to `max_images` images spread over the list."""
    picks = images[:: max(1, len(images) // max_images)][:max_images]
    shares = torch.zeros(len(downscales), dtype=torch.float64)
    for img in picks:
        grey = img.detach().double().cpu().mean(0)
        amp = torch.fft.fft2(grey - grey.mean()).abs()
        fy = torch.fft.fftfreq(grey.shape[0], dtype=torch.float64)[:, None]
        fx = torch.fft.fftfreq(grey.shape[1], dtype=torch.float64)[None, :]
        band = torch.maximum(fx.abs(), fy.abs())  # cycles per pixel: an image 1/d the size holds <= 0.5/d
        total = amp.sum().clamp_min(1e-30)
        shares += torch.tensor([amp[band <= 0.5 / d].sum() / total for d in downscales], dtype=torch.float64)
    return (shares / len(picks)).tolist()


def auto_schedule(images, iterations: int, max_downscale: float, full_at: float) -> ResolutionSchedule:
    """Levels from max_downscale down to 1 in steps of sqrt(2); level k (coarsest first) hands
    over to the next when the ramp, linear in the step up to full_at x iterations, passes the
    amplitude share level k holds."""
    count = max(1, round(2 * math.log2(max_downscale)))
    downscales = [max_downscale / math.sqrt(2) ** k for k in range(count)] + [1.0]
    downscales = [round(d, 3) for d in downscales]
    shares = amplitude_share(images, downscales)
    ramp = full_at * iterations
    starts = [0] + [min(round(shares[k] * ramp), round(ramp)) for k in range(len(downscales) - 1)]
    return _strictly_rising(starts, downscales)


def manual_schedule(downscales, steps, iterations: int) -> ResolutionSchedule:
    scale = iterations / REFERENCE_ITERATIONS
    return _strictly_rising([round(s * scale) for s in steps], [float(d) for d in downscales])


def _strictly_rising(starts, downscales) -> ResolutionSchedule:
    """Levels that would last no step are dropped (a later start wins a tie)."""
    kept_s, kept_d = [], []
    for s, d in zip(starts, downscales):
        while kept_s and kept_s[-1] >= s:
            kept_s.pop(), kept_d.pop()
        kept_s.append(s), kept_d.append(d)
    return ResolutionSchedule(tuple(kept_s), tuple(kept_d))


def make_schedule(cfg, images) -> ResolutionSchedule | None:
    """The run's schedule from cfg.schedule, or None (schedule.resolution=none)."""
    sc = cfg.schedule
    if sc.resolution == "none":
        return None
    if sc.resolution == "manual":
        return manual_schedule(sc.downscales, sc.steps, cfg.iterations)
    return auto_schedule(images, cfg.iterations, sc.max_downscale, sc.full_at)
