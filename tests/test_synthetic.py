import torch

from gsexp.render import render
from gsexp.scene import load_scene


def test_synthetic_scene_is_the_ground_truth_render():
    scene = load_scene("synthetic", num_gaussians=400, num_views=10, width=32, height=24, test_every=5)
    assert len(scene.train_images) == 8 and len(scene.test_images) == 2
    assert scene.train_images[0].shape == (3, 24, 32)
    assert scene.points is not None and scene.points.shape[1] == 3
    gt = scene.meta["ground_truth"]
    with torch.no_grad():
        again = render(gt, scene.test_cameras[1]).image
    assert torch.equal(again, scene.test_images[1])
    covered = torch.stack(scene.train_images).amax(1) > 0.05
    assert 0.05 < covered.float().mean() < 0.9  # the object is in frame, not filling it


def test_synthetic_is_deterministic_and_seeded():
    a = load_scene("synthetic", num_gaussians=100, num_views=4, width=16, height=16)
    b = load_scene("synthetic", num_gaussians=100, num_views=4, width=16, height=16)
    c = load_scene("synthetic", num_gaussians=100, num_views=4, width=16, height=16, seed=1)
    assert torch.equal(a.train_images[0], b.train_images[0])
    assert not torch.equal(a.train_images[0], c.train_images[0])
