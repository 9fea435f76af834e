"""How far undistortion moves a pixel, from a COLMAP model's own camera parameters:

    python experiments/real_captures/distortion.py ../shared/data/colmap/beer/sparse/0 [more sparse/0 ...]

For each camera: the distance between a pixel and where a pinhole camera with the same focal
length and principal point would see the same ray, at the four corners and at the middle of
two edges. Prints the cameras' focal lengths and extra parameters and the median and maximum
shifts over the cameras, and the model's mean reprojection error.
"""
import sys

import numpy as np

from gsexp.scene.undistort import import_pycolmap


def shifts(cam) -> tuple[float, float]:
    """(largest corner shift, largest edge-middle shift) in pixels."""
    w, h = cam.width, cam.height
    pixels = np.array([[0.5, 0.5], [w - 0.5, 0.5], [0.5, h - 0.5], [w - 0.5, h - 0.5], [w / 2, 0.5], [0.5, h / 2]])
    rays = cam.cam_from_img(pixels)  # normalised image coordinates with the distortion removed
    focal = np.array([cam.focal_length_x, cam.focal_length_y])
    centre = np.array([cam.principal_point_x, cam.principal_point_y])
    d = np.linalg.norm(rays * focal + centre - pixels, axis=1)
    return float(d[:4].max()), float(d[4:].max())


def main(paths) -> None:
    pycolmap = import_pycolmap()
    for path in paths:
        rec = pycolmap.Reconstruction(path)
        cams = list(rec.cameras.values())
        d = np.array([shifts(c) for c in cams])
        focal = [c.mean_focal_length() if callable(c.mean_focal_length) else c.mean_focal_length for c in cams]
        extra = np.array([[c.params[i] for i in c.extra_params_idxs()] for c in cams])
        print(f"{path}: {len(cams)} camera(s) {sorted({c.model.name for c in cams})}, "
              f"focal {min(focal):.1f}-{max(focal):.1f} px, extra params min {extra.min(0).round(4).tolist()} "
              f"max {extra.max(0).round(4).tolist()}; shift at the corners median {np.median(d[:, 0]):.1f} px "
              f"(max {d[:, 0].max():.1f}), edge middles median {np.median(d[:, 1]):.1f} px; "
              f"{rec.num_points3D()} points, mean reprojection error {rec.compute_mean_reprojection_error():.3f} px")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
