"""The viewer during training (`viewer.enabled=true`): the model as it trains, and the loss and
PSNR curves.

Without a browser connected, a step costs one flag read: no copy of the model,
no render, no GPU sync. With one, the model is copied (on its device, no sync) at most every
`every_s` seconds and the viewer's own thread renders it."""
from __future__ import annotations

import logging
import time

import numpy as np
import torch

from gsexp.track.base import Logger

log = logging.getLogger("gsexp.train")
CURVES = (("train/loss", "loss", "#d62728"), ("train/psnr", "PSNR (dB)", "#1f77b4"))


class NoViewer:
    """viewer.enabled=false: every call does nothing."""

    def step(self, step: int) -> None:
        pass

    def close(self) -> None:
        pass


class CurveLogger(Logger):
    """Passes every call on to the run's logger and keeps the values the curves plot."""

    def __init__(self, inner: Logger):
        self.inner = inner
        self.points: dict[str, list[tuple[int, float]]] = {key: [] for key, _, _ in CURVES}
        self.evals: list[tuple[int, float]] = []

    def log(self, metrics: dict, step: int) -> None:
        for key in self.points:
            if metrics.get(key) is not None:
                self.points[key].append((step, float(metrics[key])))
        if metrics.get("eval/psnr") is not None:
            self.evals.append((step, float(metrics["eval/psnr"])))
        self.inner.log(metrics, step)

    def log_image(self, key, image, step) -> None:
        self.inner.log_image(key, image, step)

    def summary(self, values: dict) -> None:
        self.inner.summary(values)

    def rewind(self, step: int) -> None:
        self.inner.rewind(step)

    def finish(self, status: str = "ok") -> None:
        self.inner.finish(status)


class LiveViewer:
    """A Viewer fed by the training loop: `step(step)` once per step."""

    def __init__(self, scene, curves: CurveLogger, model, *, host: str, port: int, every_s: float):
        from gsexp.view.server import Viewer
        from gsexp.view.source import Source

        self.model, self.curves, self.every_s = model, curves, every_s
        with torch.no_grad():
            first = model().map(lambda t: t.detach().clone())
        source = Source(first, name=f"training {scene.name}", train_cameras=scene.train_cameras,
                        test_cameras=scene.test_cameras, background=tuple(scene.background))
        self.viewer = Viewer(source, host=host, port=port, device=first.means.device, verbose=False)
        self.charts = self._add_charts()
        self.status = self.viewer.server.gui.add_markdown("step 0")
        self.last_push = -float("inf")
        log.info(f"viewer: {self.viewer.url} (renders only while a browser is connected)")
        # In the log, so that a slow stretch of training can be matched to a watcher.
        self.viewer.server.on_client_connect(lambda c: log.info(f"viewer: browser {c.client_id} connected"))
        self.viewer.server.on_client_disconnect(lambda c: log.info(f"viewer: browser {c.client_id} left"))

    def _add_charts(self) -> dict:
        gui, charts = self.viewer.server.gui, {}
        with gui.add_folder("Training"):
            for key, label, colour in CURVES:
                charts[key] = gui.add_uplot(data=(np.zeros(1), np.zeros(1)), series=({"label": "step"}, {
                    "label": label, "stroke": colour, "width": 2}), title=label, aspect=2.0,
                    scales={"x": {"time": False}})  # steps, not seconds since 1970
        return charts

    def step(self, step: int) -> None:
        if not self.viewer.has_clients():  # the common case: nothing else
            return
        now = time.monotonic()
        if now - self.last_push < self.every_s:
            return
        self.last_push = now
        with torch.no_grad():
            self.viewer.set_model(self.model().map(lambda t: t.detach().clone()))  # training moves tensors in place
        for key, chart in self.charts.items():
            points = self.curves.points[key]
            if points:
                steps, values = zip(*points)
                chart.data = (np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64))
        evals = ", ".join(f"{v:.2f} dB at {s}" for s, v in self.curves.evals[-3:])
        self.status.content = f"step {step:,}" + (f" · test PSNR {evals}" if evals else "")

    def close(self) -> None:
        self.viewer.close()


def live_viewer(cfg, scene, logger: Logger, model):
    """(viewer, logger) for the training loop: a LiveViewer and a logger that also feeds its
    curves when cfg.viewer.enabled, else NoViewer and the logger unchanged. `model()`: the
    Gaussians as they are now."""
    settings = cfg.get("viewer")
    if settings is None or not settings.enabled:
        return NoViewer(), logger
    curves = CurveLogger(logger)
    return LiveViewer(scene, curves, model, host=settings.host, port=settings.port, every_s=settings.every_s), curves
