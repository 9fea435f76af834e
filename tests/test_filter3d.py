"""model.filter_3d (Mip-Splatting's 3D smoothing filter, issue 38): the sampling rates against a
float64 loop over the cameras, the filtered scales and opacities against their formulas, the
refresh schedule, and a training run whose PLY holds the filtered model."""
import math

import pytest
import torch

from gsexp.config import validate
from gsexp.errors import ConfigError
from gsexp.gaussians import Gaussians, load_ply
from gsexp.scene import load_scene
from gsexp.train.filter3d import BORDER, Filter3D, filtered
from test_train_config import compose_train
from test_train_run import TINY


def cameras():
    return load_scene("synthetic", num_gaussians=50, num_views=6, width=40, height=30, num_points=0).train_cameras


def rates_reference(cams, means):
    """Per mean the largest focal / depth over the cameras that see it (past the near plane,
    within 15 % of the image beyond its border), else the smallest such rate of any mean."""
    best = torch.zeros(len(means), dtype=torch.float64)
    for c in cams:
        m = c.world_to_camera.double()
        x = means.double() @ m[:3, :3].T + m[:3, 3]
        for i, (px, py, z) in enumerate(x.tolist()):
            if z <= 0.2:
                continue
            u, v = c.fx * px / z + c.cx, c.fy * py / z + c.cy
            if -BORDER * c.width <= u <= (1 + BORDER) * c.width and -BORDER * c.height <= v <= (1 + BORDER) * c.height:
                best[i] = max(best[i].item(), max(c.fx, c.fy) / z)
    seen = best > 0
    best[~seen] = best[seen].min()
    return best


def test_rates_match_a_loop_over_the_cameras(monkeypatch):
    cams = cameras()
    torch.manual_seed(3)
    means = torch.randn(400, 3) * 2.0  # some behind or beside every camera
    means[:5] = torch.tensor([1e4, 1e4, 1e4])  # seen by none: the coarsest seen rate
    want = rates_reference(cams, means)
    got = Filter3D(cams, "cpu").rates(means)
    assert (want > 0).all() and torch.allclose(got.double(), want, rtol=1e-5)
    monkeypatch.setattr("gsexp.train.filter3d.PAIRS", 500)  # one camera a chunk
    assert torch.allclose(Filter3D(cams, "cpu").rates(means).double(), want, rtol=1e-5)


def model(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Gaussians(torch.randn(n, 3, generator=g), torch.randn(n, 3, generator=g) - 3,
                     torch.randn(n, 4, generator=g), torch.randn(n, generator=g) * 4, torch.rand(n, 1, 3, generator=g), 0)


def test_filtered_scales_and_opacity_follow_the_formulas():
    g = model()
    f = Filter3D(cameras(), "cpu")
    f.std = torch.rand(len(g)) * 0.1
    out = f.apply(g)
    s2, f2 = g.log_scales.double().exp() ** 2, f.std.double()[:, None] ** 2
    assert torch.allclose(out.log_scales.double().exp() ** 2, s2 + f2, rtol=1e-5)
    coef = (s2.prod(1) / (s2 + f2).prod(1)).sqrt()
    assert torch.allclose(out.opacity_logits.double().sigmoid(), g.opacity_logits.double().sigmoid() * coef,
                          rtol=1e-4, atol=1e-7)
    assert (coef < 1).all()
    f.std = torch.zeros(len(g))  # no filter: the model as it was
    same = f.apply(g)
    assert torch.allclose(same.log_scales, g.log_scales) and torch.allclose(same.opacity_logits, g.opacity_logits,
                                                                              atol=1e-4)


def test_gradients_are_finite_for_every_opacity():
    g = model()
    g.opacity_logits = torch.linspace(-30, 30, len(g))
    g.requires_grad_(True)
    f = Filter3D(cameras(), "cpu")
    f.std = torch.rand(len(g)) * 0.05
    out = f.apply(g)
    (out.log_scales.sum() + out.opacity_logits.sigmoid().sum()).backward()
    assert torch.isfinite(g.log_scales.grad).all() and torch.isfinite(g.opacity_logits.grad).all()
    assert g.opacity_logits.grad.abs().max() > 0


def test_refresh_every_100_steps_and_when_the_count_changes():
    f = Filter3D(cameras(), "cpu")
    means = torch.randn(100, 3)
    f.refresh(means, 1)
    first = f.std
    f.refresh(means + 1, 2)
    assert f.std is first  # not due
    f.refresh(means + 1, 100)
    assert f.std is not first
    due = f.std
    f.refresh(torch.randn(120, 3), 101)  # densification changed the count
    assert f.std is not due and len(f.std) == 120


def test_training_exports_the_filtered_model(tmp_path):
    """The final checkpoint keeps the filter of the trained means; the PLY, and every reader of
    the run's checkpoint (gsexp.eval, export, bench), get the model filtered with it."""
    from gsexp.bench.models import load_checkpoint_gaussians
    from gsexp.gaussians import to_gaussians
    from gsexp.track import Logger
    from gsexp.train import recipe
    from gsexp.train.checkpoint import latest_checkpoint, load_checkpoint

    cfg = validate(compose_train(TINY + ["iterations=12", "eval_every=0", "checkpoint_every=0", "model.filter_3d=true"]))
    summary = recipe.train(cfg, tmp_path, Logger(), [])
    assert summary["status"] == "ok" and math.isfinite(summary["psnr"])
    ckpt = load_checkpoint(latest_checkpoint(tmp_path))
    raw = to_gaussians(ckpt["params"], cfg.model.sh_degree).detach()
    f = Filter3D(load_scene("synthetic", **cfg.data.options).train_cameras, "cpu", cfg.model.filter_3d_size)
    f.refresh(raw.means)
    assert torch.allclose(ckpt["filter_3d"], f.std)  # of the trained means, not step 1's
    want = filtered(raw, ckpt["filter_3d"])
    for got in (load_ply(tmp_path / "point_cloud.ply"), load_checkpoint_gaussians(tmp_path)):
        assert torch.allclose(got.log_scales, want.log_scales, atol=1e-5)
        assert torch.allclose(got.opacity_logits, want.opacity_logits, atol=1e-4)
    assert (want.log_scales > raw.log_scales).all()  # every Gaussian widened


def test_not_with_compression():
    with pytest.raises(ConfigError, match="model.filter_3d"):
        validate(compose_train(TINY + ["model.filter_3d=true", "compress=prune"]))


def test_a_filtered_run_resumes(tmp_path):
    """resume=auto: the filter is recomputed from the checkpoint's means and training goes on."""
    from gsexp.track import Logger
    from gsexp.train import recipe

    first = validate(compose_train(TINY + ["iterations=8", "eval_every=0", "checkpoint_every=0", "model.filter_3d=true"]))
    recipe.train(first, tmp_path, Logger(), [])
    more = validate(compose_train(TINY + ["iterations=12", "eval_every=0", "checkpoint_every=0", "model.filter_3d=true",
                                          "resume=auto"]))
    summary = recipe.train(more, tmp_path, Logger(), [])
    assert summary["status"] == "ok" and summary["attempts"] == 2 and math.isfinite(summary["psnr"])


def test_resets_bound_the_opacity_as_rendered():
    """Mip-Splatting resets the filtered opacity to at most 0.01: a Gaussian far thinner than its
    filter keeps a raw opacity above 0.01 (its rendered one is then 0.01), one rendered below
    0.01 keeps its own, and without the filter the raw opacity is clamped as before."""
    from gsexp.gaussians import surgery
    from gsexp.train.strategy import make_strategy

    g = model(200)
    g.opacity_logits = torch.linspace(-8, 6, 200)
    f = Filter3D(cameras(), "cpu")
    f.refresh(g.means)
    f.std = torch.rand(200, generator=torch.Generator().manual_seed(1)) * 0.2  # coefficients ~1e-4..1
    params = {"means": torch.nn.Parameter(g.means.clone()), "log_scales": torch.nn.Parameter(g.log_scales.clone()),
              "opacity_logits": torch.nn.Parameter(g.opacity_logits.clone())}
    optimizers = {k: torch.optim.Adam([v], lr=0.01) for k, v in params.items()}
    strategy = make_strategy("default", scene_extent=1.0, white_background=False, training_pixels=100)
    strategy.opacity_factor = lambda p: f.opacity_factor(p["means"], p["log_scales"])
    before = filtered(g, f.std).opacity_logits.sigmoid()
    strategy.clamp_opacity(params, optimizers, 0.01)
    after = filtered(Gaussians(params["means"], params["log_scales"], g.quats, params["opacity_logits"], g.sh, 0),
                     f.std).opacity_logits.detach().sigmoid()
    assert torch.allclose(after, torch.minimum(before, torch.tensor(0.01)), rtol=1e-4, atol=1e-7)
    raw = params["opacity_logits"].detach().sigmoid()
    assert (raw > 0.02).sum() > 20 and (before < 0.01).sum() > 20  # both kinds were there
    plain = {"opacity_logits": torch.nn.Parameter(g.opacity_logits.clone())}
    surgery.reset_opacity(plain, {"opacity_logits": torch.optim.Adam([plain["opacity_logits"]])}, 0.01)
    assert torch.allclose(plain["opacity_logits"].detach().sigmoid(), g.opacity_logits.sigmoid().clamp(max=0.01))


def test_the_trainer_gives_the_strategy_the_filter(tmp_path):
    from gsexp.gaussians import to_gaussians
    from gsexp.train.setup import setup

    cfg = validate(compose_train(TINY + ["iterations=4", "strategy=default", "model.filter_3d=true"]))
    run = setup(cfg, tmp_path)
    factor = run.strategy.opacity_factor(run.params)
    raw = to_gaussians(run.params, cfg.model.sh_degree).detach()
    want = filtered(raw, run.filter3d.std).opacity_logits.sigmoid() / raw.opacity_logits.sigmoid()
    assert torch.allclose(factor, want, rtol=1e-4) and (factor < 1).all()
    plain = setup(validate(compose_train(TINY + ["iterations=4", "strategy=default"])), tmp_path / "plain")
    assert plain.strategy.opacity_factor is None
