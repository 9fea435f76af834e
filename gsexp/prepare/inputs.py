"""What gsexp.prepare checks before any work (the photos, the scene folder) and how it writes the
scene: into a staging folder beside it, moved into place only when everything succeeded."""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from gsexp.scene.masks import mask_file

PHOTO_EXTENSIONS = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp")
MIN_IMAGES = 3  # incremental mapping needs an initial pair and one more view to be worth running


class PrepareError(ValueError):
    """A problem with the photos, the folders or the reconstruction: one line, exit status 2."""


def list_photos(folder: Path) -> list[str]:
    """The photo files directly in `folder`, sorted (hidden files skipped)."""
    if not folder.exists():
        raise PrepareError(f"image folder {folder} does not exist (relative paths are from {Path.cwd()})")
    if not folder.is_dir():
        raise PrepareError(f"{folder} is not a folder; give the folder that holds the photos")
    names = sorted(p.name for p in folder.iterdir()
                   if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in PHOTO_EXTENSIONS)
    if len(names) < MIN_IMAGES:
        subfolders = any(p.is_dir() for p in folder.iterdir())
        raise PrepareError(f"too few images: {len(names)} photo(s) ({', '.join(PHOTO_EXTENSIONS)}) in {folder}, "
                           f"need at least {MIN_IMAGES}; structure from motion needs overlapping photos "
                           "of the scene from several viewpoints (20 or more work best)"
                           + ("; sub-folders are not searched: give the folder that holds the photos"
                              if subfolders else ""))
    return names


def photo_sizes(folder: Path, names: list[str]) -> dict[str, tuple[int, int]]:
    """name -> (width, height), reading each header; unreadable files fail together, named."""
    sizes, bad = {}, []
    for name in names:
        try:
            with Image.open(folder / name) as im:
                im.verify()  # the header and structure, without decoding every pixel
                sizes[name] = im.size
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
            bad.append(f"{name} ({type(err).__name__}: {str(err).splitlines()[0][:80] if str(err) else 'unreadable'})")
    if bad:
        raise PrepareError(f"cannot read {len(bad)} of {len(names)} file(s) in {folder}: {'; '.join(bad[:5])}"
                           f"{' ...' if len(bad) > 5 else ''}; replace them or move them out of the folder")
    return sizes


def mask_files(folder: Path, images: Path, scene: Path, sizes: dict) -> dict[str, Path]:
    """photo name -> its mask in `folder`: named as the photo (any image type), of the photo's size
    (`sizes`: name -> (width, height)). Checked before any SfM; the first photo without a fitting
    mask is the error."""
    if not folder.exists():
        raise PrepareError(f"mask folder {folder} does not exist (relative paths are from {Path.cwd()})")
    if not folder.is_dir():
        raise PrepareError(f"mask folder {folder} is not a folder; give the folder that holds the masks")
    src, dst = folder.resolve(), scene.resolve()
    if src == images.resolve():  # a photo would pass for its own mask
        raise PrepareError(f"the mask folder is the image folder {images}; keep the masks in a folder of their own, "
                           "named as the photos")
    if dst == src or dst in src.parents:  # --overwrite would delete the masks with the old scene
        raise PrepareError(f"mask folder {folder} is inside the scene folder {scene}; move the masks out first, or "
                           "choose another scene folder")
    files = {}
    for name, (width, height) in sizes.items():
        stem = Path(name).stem
        path = mask_file(folder, stem)
        if path is None:
            missing = sum(mask_file(folder, Path(n).stem) is None for n in sizes)
            raise PrepareError(f"no mask for photo {name} in {folder} ({missing} of {len(sizes)} photos have none); "
                               f"add {stem}.png (or another image type) of the photo's size, white = use")
        try:
            with Image.open(path) as im:
                size = im.size
        except (UnidentifiedImageError, OSError) as err:
            raise PrepareError(f"cannot read mask {path} ({type(err).__name__}); replace it with a greyscale "
                               "image of the photo's size, white = use") from None
        if size != (width, height):
            raise PrepareError(f"mask {path} is {size[0]}x{size[1]} but its photo {name} is {width}x{height}; "
                               "save each mask at its photo's size")
        files[name] = path
    return files


def check_folders(images: Path, scene: Path, overwrite: bool) -> None:
    """The scene folder may not hold or sit inside the photos, and must be empty unless overwrite."""
    src, dst = images.resolve(), scene.resolve()
    if dst == src or src in dst.parents:
        raise PrepareError(f"scene folder {scene} is inside the image folder {images}; gsexp.prepare never "
                           "writes into the photos' folder: choose a scene folder elsewhere")
    if dst in src.parents:
        raise PrepareError(f"image folder {images} is inside the scene folder {scene}; writing the scene "
                           "would replace the photos: move them out first, or choose another scene folder")
    if scene.exists() and not scene.is_dir():
        raise PrepareError(f"scene folder {scene} is a file; choose a folder")
    if scene.is_dir() and any(scene.iterdir()) and not overwrite:
        raise PrepareError(f"scene folder {scene} is not empty; choose a new folder, or pass --overwrite "
                           "to replace it once the new scene is complete")


@contextmanager
def staging(scene: Path):
    """A fresh folder beside `scene` to write into; on success it replaces `scene` (the old one is
    removed only after the new one is in place), on failure it is removed and `scene` is untouched."""
    scene.parent.mkdir(parents=True, exist_ok=True)
    stage = scene.parent / f".{scene.name}.prepare-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = scene.parent / f".{scene.name}.old-{os.getpid()}"
    if scene.exists():
        scene.rename(old)  # a kill from here on leaves the old scene beside the new one, not lost
    stage.rename(scene)
    shutil.rmtree(old, ignore_errors=True)
