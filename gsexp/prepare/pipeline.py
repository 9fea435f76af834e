"""prepare(): photos -> a scene folder that `data=colmap` reads (images/ + sparse/0, PINHOLE cameras).

    <scene>/images/*.png         the registered photos, undistorted (lossless)
    <scene>/masks/*.png          with masks: theirs, warped as the photos and named as images/ (data.masks)
    <scene>/sparse/0/            the model with those PINHOLE cameras
    <scene>/distorted/sparse/0/  the model as mapped, with the chosen (distorted) camera model
    <scene>/prepare.json         the options and the summary
"""
from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gsexp.prepare.inputs import PrepareError, check_folders, list_photos, mask_files, photo_sizes, staging
from gsexp.prepare.progress import Display
from gsexp.prepare.sfm import CAMERA_MODELS, MATCHERS, SfmOptions, extract, match, pick_model, reconstruct
from gsexp.scene.undistort import import_pycolmap, undistort_model


@dataclass
class Summary:
    scene: str
    images: int                 # photos given
    registered: int
    points: int
    reprojection_error: float   # mean, pixels
    seconds: float
    dropped: list = field(default_factory=list)
    stage_seconds: dict = field(default_factory=dict)
    masks: str | None = None    # the undistorted masks' folder, with --masks

    def lines(self) -> list[str]:
        out = [f"{self.scene}: {self.registered}/{self.images} images registered, {self.points:,} points, "
               f"mean reprojection error {self.reprojection_error:.3f} px, {self.seconds:.1f} s"]
        if self.dropped:
            out.append(f"not registered ({len(self.dropped)}): {', '.join(self.dropped)}")
        out.append(f"train it: python train.py data=colmap data.path={self.scene}"
                   + (f" data.masks={self.masks}" if self.masks else ""))
        return out


def check_options(opts: SfmOptions) -> None:
    if opts.camera_model not in CAMERA_MODELS:
        raise PrepareError(f"camera model {opts.camera_model!r} is not one of {', '.join(CAMERA_MODELS)}")
    if opts.matcher not in MATCHERS:
        raise PrepareError(f"matcher {opts.matcher!r} is not one of {', '.join(MATCHERS)}")
    if opts.max_size < 0 or opts.overlap < 1:
        raise PrepareError(f"max size must be >= 0 (0: as taken) and overlap >= 1, got {opts.max_size}, "
                           f"{opts.overlap}")


def prepare(images, scene, opts: SfmOptions | None = None, *, masks=None, overwrite: bool = False,
            display: Display | None = None) -> Summary:
    """Structure from motion and undistortion of the photos in `images` into the folder `scene`.
    Nothing is written into `images`; `scene` must be new or empty unless overwrite, and is
    replaced only once the new scene is complete. masks: a folder of a mask per photo, named as
    it and of its size, written undistorted into scene/masks."""
    opts = opts or SfmOptions()
    display = display or Display()
    images, scene = Path(images), Path(scene)
    check_options(opts)
    check_folders(images, scene, overwrite)
    names = list_photos(images)
    started = time.monotonic()
    times = {}
    stage = display.stage("reading", len(names))
    sizes = photo_sizes(images, names)
    stage.advance(len(names))
    times["reading"] = stage.done()
    if opts.single_camera and len(set(sizes.values())) > 1:
        counts = {f"{w}x{h}": sum(s == (w, h) for s in sizes.values()) for w, h in set(sizes.values())}
        raise PrepareError(f"the photos in {images} have {len(counts)} sizes ({counts}); one shared camera needs "
                           "one size: pass --no-single-camera (a camera per photo)")
    masked = mask_files(Path(masks), images, scene, sizes) if masks is not None else None
    with staging(scene) as out, quiet_colmap():
        model = run_sfm(images, out, names, opts, display, times)
        error = float(model.rec.compute_mean_reprojection_error())  # of the model as mapped
        stage = display.stage("undistorting", len(model.registered))
        undistort_model(model.rec, images, out, max_size=opts.max_size or None,
                        on_image=lambda _: stage.advance(), masks=masked)
        times["undistorting"] = stage.done()
        summary = Summary(str(scene), len(names), len(model.registered), model.rec.num_points3D(), error,
                          round(time.monotonic() - started, 2), model.dropped,
                          {k: round(v, 2) for k, v in times.items()}, str(scene / "masks") if masked else None)
        record = {"images": str(images.resolve()), "masks": str(Path(masks).resolve()) if masked else None,
                  "options": asdict(opts), "summary": asdict(summary), "other_models": model.others}
        (out / "prepare.json").write_text(json.dumps(record, indent=1))
    return summary


def run_sfm(images: Path, out: Path, names: list[str], opts: SfmOptions, display: Display, times: dict):
    """Features, matching and mapping into out/distorted; the model kept (see sfm.pick_model)."""
    db = out / "distorted" / "database.db"
    db.parent.mkdir(parents=True)
    stage = display.stage("features", len(names))
    extract(db, images, names, opts, stage)
    times["features"] = stage.done()
    n = len(names)  # pycolmap's matchers report no progress: say how much work it is
    pairs = n * (n - 1) // 2 if opts.matcher == "exhaustive" else n * opts.overlap
    stage = display.stage(f"matching ({opts.matcher}, up to {pairs:,} pairs)", 1)
    match(db, opts)
    stage.advance()
    times["matching"] = stage.done()
    stage = display.stage("mapping", len(names))
    recs = reconstruct(db, images, out / "distorted" / "models", opts, stage)
    model = pick_model(recs, names, images, opts.keep_largest)
    times["mapping"] = stage.done(f"{len(model.registered)} registered")
    sparse = out / "distorted" / "sparse" / "0"
    sparse.mkdir(parents=True)
    model.rec.write_binary(str(sparse))
    for path in (out / "distorted" / "models", db):  # the mapper's snapshots and the database
        remove(path)
    return model


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


@contextmanager
def quiet_colmap():
    """COLMAP's own log (glog to stderr) off but for fatal errors: the display reports progress, and
    what goes wrong comes back as one PrepareError line."""
    logging = import_pycolmap().logging
    before = logging.minloglevel
    logging.minloglevel = 3
    try:
        yield
    finally:
        logging.minloglevel = before
