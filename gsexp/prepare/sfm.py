"""Structure from motion through pycolmap: SIFT features, matching, incremental mapping, and the
choice of the model to keep (with the errors for nothing registered and a disconnected capture)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gsexp.prepare.inputs import MIN_IMAGES, PrepareError
from gsexp.scene.undistort import import_pycolmap

CAMERA_MODELS = ("SIMPLE_PINHOLE", "PINHOLE", "SIMPLE_RADIAL", "RADIAL", "OPENCV", "FULL_OPENCV",
                 "OPENCV_FISHEYE")
MATCHERS = ("exhaustive", "sequential")
CHUNK = 8  # images per extraction call: often enough for the progress display, few enough calls


@dataclass
class SfmOptions:
    camera_model: str = "SIMPLE_RADIAL"  # COLMAP's default
    single_camera: bool = True           # one camera shared by every photo (one device, fixed zoom)
    max_size: int = 1600                 # longer side for features and the written images; 0: as taken
    matcher: str = "exhaustive"          # sequential: video frames, each matched with its neighbours
    overlap: int = 10                    # sequential: how many following frames each is matched with
    keep_largest: bool = False           # a disconnected capture: keep the largest model, not fail
    seed: int = 0                        # the matches' and the mapper's RANSAC seed: repeatable models


@dataclass
class Model:
    """The reconstruction kept, the photos it registered and those it dropped."""
    rec: object
    registered: list[str]
    dropped: list[str]
    others: list[list[str]] = field(default_factory=list)  # the photos of the models not kept


def extract(db: Path, image_dir: Path, names: list[str], opts: SfmOptions, stage) -> None:
    pycolmap = import_pycolmap()
    extraction = pycolmap.FeatureExtractionOptions()
    if opts.max_size:
        extraction.max_image_size = int(opts.max_size)
    mode = pycolmap.CameraMode.SINGLE if opts.single_camera else pycolmap.CameraMode.PER_IMAGE
    reader = pycolmap.ImageReaderOptions()
    reader.camera_model = opts.camera_model
    # The photos enter the database in name order first: the extractor numbers new images in the
    # order its threads finish them, and the matcher's pairs and RANSAC draws follow the numbers,
    # so the same photos gave a different model from one run to the next.
    pycolmap.Database.open(str(db)).close()
    pycolmap.import_images(db, image_dir, camera_mode=mode, image_names=names, options=reader)
    database = pycolmap.Database.open(str(db))
    cameras = database.read_all_cameras()
    database.close()
    if opts.single_camera and cameras:  # every chunk keeps the one shared camera
        reader.existing_camera_id = cameras[0].camera_id
    for start in range(0, len(names), CHUNK):
        chunk = names[start:start + CHUNK]
        pycolmap.extract_features(db, image_dir, image_names=chunk, camera_mode=mode, reader_options=reader,
                                  extraction_options=extraction, device=pycolmap.Device.cpu)
        stage.advance(len(chunk))
    database = pycolmap.Database.open(str(db))
    read = {im.name for im in database.read_all_images()}
    database.close()
    unread = [n for n in names if n not in read]
    if unread:
        raise PrepareError(f"COLMAP could not read {len(unread)} photo(s) in {image_dir}: {', '.join(unread[:5])}"
                           f"{' ...' if len(unread) > 5 else ''}; replace them or move them out of the folder")


def match(db: Path, opts: SfmOptions) -> None:
    pycolmap = import_pycolmap()
    # The geometric verification's RANSAC draws from an unseeded generator by default (-1), so the
    # same photos gave different matches, models and trainings from one run to the next.
    verification = pycolmap.TwoViewGeometryOptions()
    verification.ransac.random_seed = int(opts.seed)
    if opts.matcher == "sequential":
        pairing = pycolmap.SequentialPairingOptions()
        pairing.overlap = int(opts.overlap)
        pycolmap.match_sequential(db, pairing_options=pairing, verification_options=verification,
                                  device=pycolmap.Device.cpu)
    else:
        pycolmap.match_exhaustive(db, verification_options=verification, device=pycolmap.Device.cpu)


def reconstruct(db: Path, image_dir: Path, out: Path, opts: SfmOptions, stage) -> dict:
    """pycolmap's incremental mapper; stage advances once per registered image."""
    pycolmap = import_pycolmap()
    options = pycolmap.IncrementalPipelineOptions()
    options.random_seed = int(opts.seed)
    # One thread: with several, the same database gave another model about one run in five (cause
    # not traced); on the 2-core machine one thread was faster on 10 photos too
    options.num_threads = 1
    out.mkdir(parents=True, exist_ok=True)
    return pycolmap.incremental_mapping(db, image_dir, out, options=options,
                                        initial_image_pair_callback=lambda: stage.advance(2),
                                        next_image_callback=lambda: stage.advance(1))


def pick_model(recs: dict, names: list[str], image_dir: Path, keep_largest: bool) -> Model:
    """The largest model; an error when none registered anything, or when the photos fell apart
    into several models (unless keep_largest), naming the photos that would be dropped."""
    models = sorted((r for r in recs.values() if r.num_reg_images() > 0), key=lambda r: -r.num_reg_images())
    advice = ("Take photos with more overlap (each view should share about two thirds with the next), in focus "
              "and of a textured scene")
    if not models:
        raise PrepareError(f"no photo in {image_dir} could be registered: COLMAP found no pair of photos that "
                           f"share enough matching features. {advice}")
    groups = [sorted(im.name for im in r.images.values() if im.has_pose) for r in models]
    if len(groups[0]) < MIN_IMAGES:  # two views make a model, but nothing to train on
        raise PrepareError(f"only {len(groups[0])} of {len(names)} photos in {image_dir} could be registered "
                           f"together ({short(groups[0])}). {advice}; or try the default camera model "
                           "with one shared camera")
    kept = set(groups[0])
    dropped = [n for n in names if n not in kept]
    # The mapper may also return a small model of photos the largest one holds: not a split.
    others = [g for g in groups[1:] if set(g) - kept]
    if others and not keep_largest:
        parts = "; ".join(f"{len(g)} photos ({short(g)})" for g in [groups[0], *others])
        raise PrepareError(f"the photos in {image_dir} form {len(others) + 1} separate models: {parts}. Keeping "
                           f"the largest would drop {len(dropped)} photo(s): {short(dropped)}. Add photos that "
                           "bridge the parts, or pass --keep-largest to keep the largest model")
    return Model(models[0], groups[0], dropped, others)


def short(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
