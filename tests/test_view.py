"""The viewer in a real browser: Debian's chromium, headless, driven through playwright, on a
viewer serving the synthetic scene's Gaussians on loopback (CPU, the torch reference).

It fails on a dead server (the page does not load), on a blank canvas (the canvas must show
the frame the server rendered) and on a rasterizer switch that the page does not report.
It skips only where chromium or playwright is missing outside CI; with CI=true it fails."""
import io
import os
import shutil
import time

import numpy as np
import pytest
import torch
from PIL import Image

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]  # WebGL in software
FIRST_FRAME_S = 90  # a cold CPU render plus the page's own start on a loaded 2-core machine
# The canvas scales the JPEG frame to the window and draws the camera frustums over it: 3D
# lines and resampling move a pixel by a few levels, a blank or wrong canvas by tens.
MAX_MEAN_DIFF = 12.0


def need(what: str, ok: bool):
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing and CI=true: .ci/run installs it (chromium; pip install -e '.[browser]')")
    pytest.skip(f"{what} is missing (apt-get install chromium; pip install -e '.[browser]'); CI runs this test")


@pytest.fixture(scope="module")
def viewer():
    from gsexp.scene.synthetic import ground_truth, ring_cameras
    from gsexp.view.server import Viewer
    from gsexp.view.source import Source

    need("chromium", shutil.which("chromium") is not None)
    source = Source(ground_truth(600), "synthetic", train_cameras=ring_cameras(6, 64, 64))
    v = Viewer(source, port=0, device="cpu", height=96, verbose=False)
    yield v
    v.close()


@pytest.fixture(scope="module")
def page(viewer, tmp_path_factory):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need("playwright", False)
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        # A persistent context is playwright's way to pass --user-data-dir (a fresh profile).
        browser = p.chromium.launch_persistent_context(profile, executable_path=shutil.which("chromium"),
                                                       headless=True, args=CHROMIUM_FLAGS,
                                                       viewport={"width": 800, "height": 600})
        page = browser.new_page()
        page.goto(viewer.url)  # raises on a dead server
        page.get_by_text("FPS").wait_for(timeout=FIRST_FRAME_S * 1000)
        yield page
        browser.close()


def report(page) -> str:
    return page.get_by_text("FPS").locator("xpath=..").inner_text()


def wait_for(condition, timeout_s: float = 60.0, what: str = ""):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def canvas_pixels(page) -> np.ndarray:
    canvas = max(page.locator("canvas").all(), key=lambda c: c.bounding_box()["width"])
    return np.asarray(Image.open(io.BytesIO(canvas.screenshot())).convert("RGB"), dtype=np.float32)


def canvas_vs_frame(viewer, page) -> tuple:
    """(mean level difference, canvas std) between the canvas and the server's newest frame,
    left of the panel, below the notice that WebGL runs in software, above the axes gizmo."""
    frame = viewer.frame.astype(np.float32)
    shot = canvas_pixels(page)
    h, w = frame.shape[:2]
    scaled = np.asarray(Image.fromarray(shot.astype(np.uint8)).resize((w, h), Image.BILINEAR), dtype=np.float32)
    rows, cols = slice(int(0.3 * h), int(0.85 * h)), slice(int(0.1 * w), int(0.55 * w))
    return float(np.abs(scaled[rows, cols] - frame[rows, cols]).mean()), float(scaled[rows, cols].std())


def test_canvas_shows_the_servers_render(viewer, page):
    assert viewer.frame.astype(np.float32).std() > 20, "the render itself is blank"
    # The page's first camera message can arrive after the first frame, so the server may send
    # a second frame while the canvas still shows the first: compare until they agree (or time out).
    seen = []

    def agrees():
        seen.append(canvas_vs_frame(viewer, page))
        return seen[-1][1] > 20 and seen[-1][0] < MAX_MEAN_DIFF
    try:
        wait_for(agrees, timeout_s=30, what=f"the canvas to show the server's frame (canvas std > 20, not blank; "
                                            f"mean difference < {MAX_MEAN_DIFF} levels)")
    finally:
        print("canvas vs the server's frame (mean levels, canvas std):", [f"{d:.1f}, {s:.1f}" for d, s in seen])


def test_switching_the_rasterizer_changes_the_report(viewer, page):
    assert "torch ·" in report(page) and "stages (ms): preprocess" in report(page)
    page.get_by_label("Rasterizer").click()
    page.get_by_role("option", name="torch:blend=gemm").click()
    wait_for(lambda: "torch:blend=gemm ·" in report(page), what="the page to report torch:blend=gemm")
    assert viewer.last["rasterizer"] == "torch:blend=gemm"
    pairs = viewer.last["pairs"]
    page.get_by_label("Intersect").click()
    page.get_by_role("option", name="accutile").click()
    wait_for(lambda: "intersect accutile" in report(page), what="the page to report intersect accutile")
    shown = int(report(page).split(" pairs")[0].split("·")[-1].replace(",", ""))
    assert shown == viewer.last["pairs"] < pairs  # tight tile sets: fewer pairs, reported on the page


def test_the_depth_channel_reaches_the_canvas(viewer, page):
    """Channel: depth in the browser: the page reports the frame's depth range and the canvas
    shows the depth picture the server sent; back to rgb after."""
    colour = viewer.frame.copy()
    page.get_by_label("Channel").click()
    page.get_by_role("option", name="depth").click()
    try:
        wait_for(lambda: "(red) to" in report(page), what="the page to report the depth range")
        assert "depth_range" in viewer.last and not np.array_equal(viewer.frame, colour)
        wait_for(lambda: (lambda d: d[1] > 20 and d[0] < MAX_MEAN_DIFF)(canvas_vs_frame(viewer, page)),
                 timeout_s=30, what="the canvas to show the depth frame")
    finally:
        page.get_by_label("Channel").click()
        page.get_by_role("option", name="rgb").click()
        wait_for(lambda: "(red) to" not in report(page), what="the page to go back to rgb")


def test_the_panel_offers_the_cuda_variants_only_with_a_gpu():
    from gsexp.view.controls import CUDA_SPECS, REFERENCE_SPECS, rasterizer_specs

    specs, start = rasterizer_specs(False)
    assert specs == list(REFERENCE_SPECS) and start == "torch"
    specs, start = rasterizer_specs(True, {"_target_": "gsexp.render.settings.TcGsSettings", "precision": "tf32"})
    assert set(CUDA_SPECS) <= set(specs) and start == "tc_gs:precision=tf32"  # the run's own first
    specs, start = rasterizer_specs(False, {"_target_": "gsexp.render.settings.VanillaSettings"})
    assert start == "torch" and "vanilla" not in specs  # a CUDA run's model on a CPU: the reference


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the kernels)")
def test_every_cuda_variant_and_intersect_renders_in_the_viewer():
    """On a GPU: each CUDA variant with each intersect mode draws a frame with its stages (no browser)."""
    from gsexp.render.constants import INTERSECTS
    from gsexp.scene.synthetic import ground_truth, ring_cameras
    from gsexp.view import cameras as cams
    from gsexp.view.controls import CUDA_SPECS
    from gsexp.view.server import Viewer
    from gsexp.view.source import Source

    views = ring_cameras(4, 64, 64)
    viewer = Viewer(Source(ground_truth(600), "synthetic", train_cameras=views), port=0, device="cuda", height=128,
                    verbose=False)
    try:
        pose = (*cams.pose_of(views[0]), views[0].fov_y, 1.0)
        reference, _ = viewer.render_view(*pose)  # the torch reference on the GPU
        for spec in CUDA_SPECS:
            for intersect in INTERSECTS:
                viewer.controls.rasterizer.value, viewer.controls.intersect.value = spec, intersect
                image, stats = viewer.render_view(*pose)
                assert image is not None, stats.get("error")
                assert "blend" in stats["stage_ms"] and stats["pairs"] > 0
                # 8-bit frames of the same model: fp16 operands move a pixel by a level or two
                assert abs(image.astype(int) - reference.astype(int)).mean() < 1.0, (spec, intersect)
    finally:
        viewer.close()
        torch.cuda.synchronize()
