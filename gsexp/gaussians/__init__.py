from gsexp.gaussians.geometry import covariance_3d, quat_to_rotmat
from gsexp.gaussians.model import Gaussians, knn_rms_distance
from gsexp.gaussians.params import make_params, to_gaussians
from gsexp.gaussians.ply import load_ply, save_ply
from gsexp.gaussians.sh import eval_sh, num_sh_bases, rgb_to_sh, sh_degree_of, sh_to_rgb

__all__ = ["Gaussians", "load_ply", "save_ply", "eval_sh", "num_sh_bases", "sh_degree_of", "rgb_to_sh",
           "sh_to_rgb", "knn_rms_distance", "make_params", "to_gaussians", "quat_to_rotmat",
           "covariance_3d"]
