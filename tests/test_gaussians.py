import math

import pytest
import torch

from gsexp.gaussians import Gaussians, knn_rms_distance
from gsexp.gaussians.sh import C0, eval_sh


def test_from_points_scale_is_log_knn_rms_distance():
    # a 5x5x5 grid with spacing 0.1: every point's 3 nearest neighbours are 0.1 away
    axis = torch.arange(5) * 0.1
    pts = torch.stack(torch.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)
    g = Gaussians.from_points(pts, torch.rand(len(pts), 3), sh_degree=2)
    assert torch.allclose(g.log_scales, torch.full_like(g.log_scales, math.log(0.1)), atol=1e-5)
    assert g.sh.shape == (125, 9, 3) and (g.sh[:, 1:] == 0).all()
    assert torch.allclose(g.opacities, torch.full((125,), 0.1))
    assert torch.allclose(g.quats, torch.tensor([1.0, 0, 0, 0]).expand(125, 4))


def test_knn_distance_against_brute_force():
    pts = torch.randn(300, 3, generator=torch.Generator().manual_seed(0))
    d = torch.cdist(pts, pts)
    d.fill_diagonal_(float("inf"))
    expected = d.topk(3, largest=False).values.pow(2).mean(1).sqrt()  # 3DGS's distCUDA2, then sqrt
    assert torch.allclose(knn_rms_distance(pts, 3), expected, atol=1e-5)


def test_dc_colour_round_trips_through_sh():
    rgb = torch.rand(50, 3)
    g = Gaussians.from_points(torch.randn(50, 3), rgb, sh_degree=0)
    dirs = torch.nn.functional.normalize(torch.randn(50, 3), dim=1)
    assert torch.allclose(eval_sh(g.sh, dirs, 0), rgb, atol=1e-6)
    assert torch.allclose(g.sh[:, 0], (rgb - 0.5) / C0)


def test_random_init_stays_in_the_box():
    g = Gaussians.random(1000, (1.0, 2.0, 3.0), 0.5, generator=torch.Generator().manual_seed(1))
    assert ((g.means - torch.tensor([1.0, 2.0, 3.0])).abs() <= 0.5).all()
    assert len(g) == 1000 and g.sh_degree == 3
    assert torch.allclose(g.sh[:, 0] * C0 + 0.5, torch.tensor(127 / 255))  # 3DGS's grey


def test_shape_errors_name_the_field():
    with pytest.raises(ValueError, match="log_scales"):
        Gaussians(torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(4, 4), torch.zeros(4), torch.zeros(4, 1, 3))
    with pytest.raises(ValueError, match="sh_degree"):
        Gaussians(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(4, 4), torch.zeros(4), torch.zeros(4, 1, 3), 5)


def test_sh_degree_of_inverts_num_sh_bases():
    from gsexp.gaussians import num_sh_bases, sh_degree_of

    assert [sh_degree_of(num_sh_bases(d)) for d in range(4)] == [0, 1, 2, 3]
    for bad in (0, 2, 8, 25):
        with pytest.raises(ValueError, match="no SH degree"):
            sh_degree_of(bad)


def test_scene_extent_is_the_training_cameras_and_lego_inits_in_3dgs_cube(tmp_path):
    """3DGS (and gsplat's Blender parser) take the extent from the training cameras alone: the test
    cameras must not steer the learning rates and thresholds. NeRF-synthetic's random init is 3DGS's
    cube of half-size 1.3."""
    from omegaconf import OmegaConf

    from gsexp.scene import load_scene
    from gsexp.scene.camera import camera_extent
    from gsexp.train.setup import initial_gaussians

    scene = load_scene("synthetic", num_gaussians=50, num_views=8, width=32, height=24, test_every=2, num_points=0)
    assert scene.extent == pytest.approx(camera_extent(scene.train_cameras))
    assert scene.extent != pytest.approx(camera_extent(scene.train_cameras + scene.test_cameras))
    cfg = OmegaConf.create({"seed": 0, "model": {"init": "random", "num_random": 500, "random_radius": None,
                                                 "sh_degree": 0, "init_opacity": 0.1}})
    scene.meta["random_radius"] = 1.3  # what the blender loader sets
    g = initial_gaussians(cfg, scene)
    assert g.means.abs().max() <= 1.3 and g.means.abs().max() > 1.2
