"""Screenshots of the viewer in headless chromium (Debian's, through playwright).

    python experiments/viewer/screenshot.py MODEL OUT.png [--height 360]     # python -m gsexp.view MODEL
    python experiments/viewer/screenshot.py --train OUT.png [--wait 75] [train.py overrides ...]
        # python train.py viewer.enabled=true ..., shot `--wait` seconds after the page's first frame
"""
import argparse
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

FLAGS = ["--no-sandbox", "--disable-gpu", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
REPO = Path(__file__).resolve().parents[2]


def shoot(url: str, out: str, wait_s: float, size=(1100, 620)) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": size[0], "height": size[1]})
        page.goto(url)
        page.get_by_text("FPS").wait_for(timeout=120_000)
        buttons = page.locator(".mantine-Notification-root button")  # "WebGL runs in software"
        if buttons.count():
            buttons.first.click()
        time.sleep(wait_s)
        page.screenshot(path=out)
        browser.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="run dir, .pt or .ply (without --train)")
    p.add_argument("out")
    p.add_argument("--train", action="store_true")
    p.add_argument("--height", type=int, default=360)
    p.add_argument("--wait", type=float, default=4.0)
    args, overrides = p.parse_known_args()
    if not args.train:
        from gsexp.view.server import Viewer
        from gsexp.view.source import load_source

        viewer = Viewer(load_source(args.model), port=0, height=args.height, verbose=False)
        shoot(viewer.url, args.out, args.wait)
        viewer.close()
        return
    proc = subprocess.Popen([sys.executable, "train.py", "viewer.enabled=true", "viewer.port=0", *overrides],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = next(m.group(1) for line in proc.stdout if (m := re.search(r"viewer: (http://\S+)", line)))
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # a full pipe would stall training
        shoot(url, args.out, args.wait, size=(1100, 760))
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
