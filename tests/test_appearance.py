"""appearance=affine (issue 41): a colour transform per training photo, identity at the start,
learning a photo's exposure / white-balance change, held back by its regularisation."""
import pytest
import torch

from gsexp.train.appearance import AffineAppearance


def fit(reg: float, steps: int = 600):
    gen = torch.Generator().manual_seed(0)
    render = torch.rand(3, 16, 16, generator=gen)
    photos = [render, 1.2 * render + 0.05]  # photo 1: brighter, an offset
    app = AffineAppearance(2, "cpu", lr=0.01, reg=reg)
    for i in range(steps):
        view = i % 2
        loss = (app.apply(render, view) - photos[view]).abs().mean() + app.regularization(view)
        loss.backward()
        app.step()
    return app


def test_identity_at_the_start():
    app = AffineAppearance(3, "cpu")
    image = torch.rand(3, 8, 8)
    assert torch.equal(app.apply(image, 2), image) and app.regularization(2).item() == 0


def test_learns_a_photos_colour_change_and_reg_holds_it_back():
    free = fit(reg=0.0).delta.detach()
    assert torch.allclose(free[1, :, :3], 0.2 * torch.eye(3), atol=0.02)  # M = 1.2 I
    assert torch.allclose(free[1, :, 3], torch.full((3,), 0.05), atol=0.02)
    assert free[0].abs().max() < 0.02  # the photo that matches the render stays at identity
    held = fit(reg=10.0).delta.detach()
    assert held[1].square().sum() < 0.1 * free[1].square().sum()


def test_state_round_trips():
    app = fit(reg=0.0, steps=20)
    other = AffineAppearance(2, "cpu", lr=0.01)
    other.load_state_dict(app.state_dict())
    assert torch.equal(other.delta, app.delta)
    assert other.summary()["appearance_mean_change"] == pytest.approx(app.summary()["appearance_mean_change"])
