"""Write an LLFF scene (poses_bounds.npy + images_N + sparse/0/{cameras,points3D}.bin, no images.bin)
as a COLMAP scene that data=colmap reads, so that fern can be trained with its distortion ignored
and undistorted on the same poses:

    python experiments/real_captures/llff_to_colmap.py ../shared/data/llff/fern outputs/real_captures/fern_colmap

<out>/images/ holds copies of images_N, <out>/sparse/0 one SIMPLE_RADIAL camera (cameras.bin's,
rescaled to images_N), the LLFF poses (through gsexp's llff loader, so the same world frame as
data=llff) and points3D.bin's points (no tracks: the loader uses only their position and colour).
The source folder is only read.
"""
import argparse
import shutil
import struct
from pathlib import Path

import numpy as np

from gsexp.scene.colmap import read_points3d
from gsexp.scene.llff import load_llff
from gsexp.scene.undistort import import_pycolmap


def read_camera(path: Path):
    """(model id, width, height, params) of the first camera in a cameras.bin."""
    data = path.read_bytes()
    _, model, width, height = struct.unpack_from("<iiQQ", data, 8)
    count = {0: 3, 1: 4, 2: 4, 3: 5, 4: 8}[model]  # SIMPLE_PINHOLE, PINHOLE, SIMPLE_RADIAL, RADIAL, OPENCV
    return model, width, height, struct.unpack_from(f"<{count}d", data, 32)


def convert(src: Path, out: Path, downscale: int) -> None:
    pycolmap = import_pycolmap()
    scene = load_llff(src, downscale=downscale, test_every=0)
    model, width, height, params = read_camera(src / "sparse/0/cameras.bin")
    first = scene.train_cameras[0]
    cam = pycolmap.Camera(model=pycolmap.CameraModelId(model).name, width=width, height=height,
                          params=list(params), camera_id=1)
    cam.rescale(first.width, first.height)
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(cam)
    image_dir = src / f"images_{downscale}"
    files = sorted(p for p in image_dir.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    (out / "images").mkdir(parents=True)
    for k, (view, path) in enumerate(zip(scene.train_cameras, files), start=1):
        w2c = view.world_to_camera.double().numpy()
        pose = pycolmap.Rigid3d(pycolmap.Rotation3d(w2c[:3, :3]), w2c[:3, 3])
        rec.add_image_with_trivial_frame(pycolmap.Image(name=path.name, camera_id=1, image_id=k), pose)
        shutil.copy2(path, out / "images" / path.name)
    xyz, rgb = read_points3d(src / "sparse/0/points3D.bin")
    for p, c in zip(xyz.astype(np.float64), rgb):
        rec.add_point3D(p, pycolmap.Track(), c)
    (out / "sparse/0").mkdir(parents=True)
    rec.write_binary(str(out / "sparse/0"))
    print(f"wrote {out}: {rec.num_reg_images()} images {first.width}x{first.height}, camera {cam.model.name} "
          f"{np.round(cam.params, 4).tolist()}, {rec.num_points3D()} points")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path, help="a new folder")
    parser.add_argument("--downscale", type=int, default=8, help="the images_N folder to use")
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"{args.out} exists; give a new folder")
    convert(args.src, args.out, args.downscale)
