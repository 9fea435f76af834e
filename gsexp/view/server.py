"""The viewer: a viser server whose background is gsexp's own render of each browser's camera.

A thread draws a frame for a client when its camera, the model or a control changed since
its last frame, and sleeps otherwise. With no browser connected it blocks until one connects:
no wake-ups, so it takes no GIL from a training loop that is bound by kernel launches."""
from __future__ import annotations

import threading
import time
import traceback

import numpy as np
import torch

from gsexp.comparison import to_uint8
from gsexp.depth_colors import depth_colors, depth_range
from gsexp.render import render
from gsexp.view import cameras as cams
from gsexp.view.controls import Controls, rasterizer_specs
from gsexp.view.source import Source

IDLE_S = 0.02  # how often the render thread looks for work while a browser is connected


class Viewer:
    """Serve `source` on http://host:port. `set_model` swaps the Gaussians (live training).
    `port` 0 picks a free one, a busy one the next free; `self.port` is the one bound."""

    def __init__(self, source: Source, *, host: str = "127.0.0.1", port: int = 8080, device=None,
                 height: int | None = None, verbose: bool = True, up=None):
        import viser

        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.source = source
        self.up = up  # the world's up to open on (a unit 3-vector); None: the cameras' own
        self.server = viser.ViserServer(host=host, port=port, label=f"gsexp · {source.name}",
                                        verbose=verbose)
        self.port = self.server.get_port()
        self.url = f"http://{host}:{self.port}"
        self._lock = threading.Lock()
        self._model, self._model_version = source.gaussians.detach().to(self.device), 0
        specs, start = rasterizer_specs(self.device.type == "cuda", source.rasterizer)
        intersect = (source.rasterizer or {}).get("intersect", "aabb")
        self.controls = Controls(self.server.gui, specs, start, sh_degree=source.gaussians.sh_degree,
                                 height=height or (1080 if self.device.type == "cuda" else 256), intersect=intersect)
        self.last: dict = {}  # the newest frame's stats (what the page shows)
        self.frame: np.ndarray | None = None  # the newest frame sent, [H, W, 3] uint8 (screenshots, checks)
        self._add_cameras()
        self._stop = threading.Event()
        self._connected = threading.Event()  # set while any browser is connected
        self.server.on_client_connect(self._greet)
        self.server.on_client_disconnect(self._left)
        self._thread = threading.Thread(target=self._loop, name="gsexp-viewer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ model and clients

    def set_model(self, gaussians) -> None:
        """Show `gaussians` from the next frame on (the caller keeps no reference to mutate)."""
        with self._lock:
            self._model, self._model_version = gaussians, self._model_version + 1

    def has_clients(self) -> bool:
        """A flag read (no lock, no copy): the training loop asks every step."""
        return self._connected.is_set()

    def close(self) -> None:
        self._stop.set()
        self._connected.set()  # wakes a thread blocked on it, which then sees _stop
        self._thread.join(timeout=5)
        self.server.stop()

    def _left(self, _client) -> None:
        # viser removes the client before this runs; another may have come meanwhile
        if not self.server.get_clients():
            self._connected.clear()

    def _greet(self, client) -> None:
        """Open on the first training camera (or a view framing the model), the scene's up."""
        self._connected.set()
        position, target, up = cams.start_view(self.source.gaussians, self.source.train_cameras, self.up)
        with client.atomic():
            client.camera.up_direction = up
            client.camera.position = position
            client.camera.look_at = target
        if self.source.train_cameras:
            client.camera.fov = self.source.train_cameras[0].fov_y

    def _add_cameras(self) -> None:
        """The training cameras as frustums; a click moves the clicked-on browser there."""
        views = self.source.train_cameras
        if not views:
            return
        centres = torch.stack([c.center for c in views]).double()
        scale = 0.05 * float((centres - centres.mean(0)).norm(dim=1).max().clamp_min(1e-3))
        shown = self.server.gui.add_checkbox("Training cameras", initial_value=True)
        handles = []
        for i, cam in enumerate(views):
            wxyz, position = cams.pose_of(cam)
            handle = self.server.scene.add_camera_frustum(
                f"/train_cameras/{i:04d}", fov=cam.fov_y, aspect=cam.width / cam.height, scale=scale,
                thickness=1.5, thickness_units="screen", wxyz=wxyz, position=position, color=(230, 120, 30))
            handle.on_click(lambda event, wxyz=wxyz, position=position: self._jump(event.client, wxyz, position))
            handles.append(handle)

        def toggle(_event):
            for h in handles:
                h.visible = shown.value
        shown.on_update(toggle)

    @staticmethod
    def _jump(client, wxyz, position) -> None:
        with client.atomic():
            client.camera.wxyz = wxyz
            client.camera.position = position

    # ------------------------------------------------------------------ rendering

    def _loop(self) -> None:
        drawn: dict[int, tuple] = {}  # client id -> what its last frame showed
        while not self._stop.is_set():
            self._connected.wait()  # no browser: block, no wake-ups
            busy = False
            for cid, client in list(self.server.get_clients().items()):
                key = (client.camera.update_timestamp, self._model_version, self.controls.version)
                if drawn.get(cid) == key or client.camera.image_height <= 0:
                    continue
                drawn[cid], busy = key, True
                self.last = self._draw(client)
                self.controls.show(self.last)
            for cid in set(drawn) - set(self.server.get_clients()):
                drawn.pop(cid)
            if not busy:
                self._stop.wait(IDLE_S)

    def _draw(self, client) -> dict:
        """Render the client's view and send it as the scene's background (JPEG-encoded here);
        the frame's stats, frame_ms from the start to the frame queued for sending."""
        start = time.perf_counter()
        cam = client.camera
        image, stats = self.render_view(cam.wxyz, cam.position, cam.fov, cam.aspect)
        if image is None:
            return stats
        self.frame = image
        client.scene.set_background_image(image, format="jpeg", jpeg_quality=90)
        frame_ms = (time.perf_counter() - start) * 1e3
        return {**stats, "frame_ms": frame_ms, "fps": 1e3 / max(frame_ms, 1e-6)}

    def render_view(self, wxyz, position, fov_y: float, aspect: float) -> tuple:
        """(image [H, W, 3] uint8, stats) of the model from a viser pose with the panel's
        settings; (None, stats with 'error') when that variant cannot run here."""
        with self._lock:
            g = self._model
        settings = self.controls.settings()
        width, height = cams.resolution(aspect, self.controls.height.value)
        camera = cams.camera_from_pose(wxyz, position, fov_y, width, height)
        stats = {"rasterizer": self.controls.rasterizer.value, "intersect": settings.intersect,
                 "width": width, "height": height, "device": device_name(self.device), "gaussians": len(g)}
        try:
            with torch.no_grad():
                start = time.perf_counter()
                out = render(g, camera.to(self.device), settings, background=self.source.background,
                             sh_degree=min(self.controls.sh_degree.value, g.sh_degree))
                if settings.depth:
                    stats["depth_range"] = span = depth_range(out.depth, out.alpha)
                    image = to_uint8(depth_colors(out.depth, out.alpha, *span))
                else:
                    image = to_uint8(out.image)
                render_ms = (time.perf_counter() - start) * 1e3  # .cpu() waited for the GPU
        except Exception as err:  # a variant that cannot run here: say so on the page, keep serving
            traceback.print_exc()
            return None, {**stats, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
        return image, {**stats, "render_ms": render_ms, "stage_ms": dict(out.stage_ms),
                                             "pairs": int(out.num_pairs)}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return "cpu"


def serve_forever(viewer: Viewer) -> None:
    """Block until Ctrl-C."""
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        viewer.close()
