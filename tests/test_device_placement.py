"""The per-view features (issue 41) keep every tensor on their input's device. Run on PyTorch's
meta device, a tensor made on the CPU inside a forward or backward fails as it would on a GPU,
so the CPU suite catches what first failed on the H100 (the bilateral grid's slice backward made
its interpolation weights with a device-less torch.arange, 2026-12-06f)."""
import pytest
import torch

from gsexp.gaussians import Gaussians
from gsexp.scene import load_scene
from gsexp.train.appearance import AffineAppearance, BilateralGridAppearance
from gsexp.train.pose import PoseCorrection

META = torch.device("meta")


@pytest.mark.parametrize("make", [AffineAppearance, BilateralGridAppearance], ids=["affine", "bilateral_grid"])
def test_appearance_runs_forward_and_backward_on_its_inputs_device(make):
    feature = make(3, META)
    image = torch.rand(3, 20, 24, device=META, requires_grad=True)
    out = feature.apply(image, 1)
    assert out.device == META and out.shape == image.shape
    (out.sum() + feature.regularization(1)).backward()
    assert image.grad.device == META and feature.delta.grad.device == META


def test_pose_correction_moves_on_its_inputs_device():
    s = load_scene("synthetic", num_gaussians=50, num_views=3, width=16, height=16, num_points=0)
    g = s.meta["ground_truth"]
    g = Gaussians(*(t.detach().to(META).requires_grad_() for t in (g.means, g.log_scales, g.quats,
                                                                    g.opacity_logits, g.sh[:, :1])), 0)
    pose = PoseCorrection(s.train_cameras, META)
    moved = pose.apply(g, 1)
    (moved.means.sum() + moved.quats.sum() + pose.regularization(1)).backward()
    assert g.means.grad.device == META and pose.delta.grad.device == META


def test_a_cpu_tensor_inside_fails_on_meta():
    """The check itself: what the grid's slice did before its fix fails here."""
    position = torch.rand(10, device=META)
    with pytest.raises(RuntimeError):
        position[:, None] - torch.arange(4, dtype=position.dtype)
