"""Models of a chosen size for the scaling study (gsexp/bench/grow.py), on the CPU."""
import subprocess
import sys

import pytest
import torch

from gsexp.bench.cameras import orbit_cameras, parse_up
from gsexp.bench.grow import main, parse_count, resize
from gsexp.gaussians import load_ply
from gsexp.metrics import psnr
from gsexp.render import render

from conftest import REPO


@pytest.fixture(scope="module")
def trained(shared):
    """A trained SH-degree-3 scene of 9,080 Gaussians."""
    return load_ply(shared / "data/scenes/inria_format_9k.ply")


def test_parse_count():
    assert [parse_count(t) for t in ("300000", "250K", "1.5M", "6m", " 2k ")] == [300_000, 250_000, 1_500_000,
                                                                                   6_000_000, 2_000]
    for bad in ("", "1G", "-3", "many", "0", "0.0001K"):
        with pytest.raises(ValueError):
            parse_count(bad)


@pytest.mark.parametrize("n", [1, 5_000, 9_080, 9_081, 18_160, 40_000])
def test_resize_gives_exactly_n_finite_gaussians(trained, n):
    out = resize(trained, n)
    assert len(out) == n and out.sh_degree == 3
    assert all(torch.isfinite(t).all() for t in out.tensors().values())


def test_growing_splits_the_largest_and_keeps_the_rest(trained):
    out = resize(trained, len(trained) + 100, seed=1)
    largest = trained.log_scales.amax(1).topk(100).indices.sort().values  # children in index order
    kept = torch.ones(len(trained), dtype=torch.bool)
    kept[largest] = False
    # survivors first, unchanged; then two children per split parent, each smaller by 1.6
    torch.testing.assert_close(out.means[:len(trained) - 100], trained.means[kept], rtol=0, atol=0)
    children = out.log_scales[len(trained) - 100:]
    parents = trained.log_scales[largest].repeat(2, 1)
    torch.testing.assert_close(children, parents - torch.log(torch.tensor(1.6)))
    torch.testing.assert_close(out.sh[len(trained) - 100:], trained.sh[largest].repeat(2, 1, 1), rtol=0, atol=0)


def test_resize_is_reproducible_and_seeded(trained):
    a, b, c = resize(trained, 20_000, seed=0), resize(trained, 20_000, seed=0), resize(trained, 20_000, seed=1)
    assert torch.equal(a.means, b.means) and not torch.equal(a.means, c.means)


def test_shrinking_keeps_the_most_visible(trained):
    out = resize(trained, 1_000)
    score = trained.opacities * trained.log_scales.sum(1).exp()
    assert out.opacities.mul(out.log_scales.sum(1).exp()).min() >= score.topk(1_000).values.min()


def test_a_grown_model_still_renders_the_scene(trained):
    """Twice the Gaussians, the same look: about 25 dB against the base model on orbit views
    (the children are sampled, so not identical), well above the same Gaussians misplaced."""
    cams, _ = orbit_cameras(trained.means, 3, 96, 64, up=parse_up("-y"))
    grown, other = resize(trained, 2 * len(trained)), resize(trained, 2 * len(trained))
    other.means = other.means[torch.randperm(len(other), generator=torch.Generator().manual_seed(0))]
    for cam in cams:
        base = render(trained, cam).image.clamp(0, 1)
        same, shuffled = (psnr(render(g, cam).image.clamp(0, 1), base).item() for g in (grown, other))
        print(f"{cam.name}: grown {same:.2f} dB, shuffled {shuffled:.2f} dB")
        assert same > 22 and same > shuffled + 4


def test_cli_writes_the_ply(trained, shared, tmp_path):
    out = tmp_path / "grown.ply"
    assert main([str(shared / "data/scenes/inria_format_9k.ply"), str(out), "--gaussians", "12K"]) == 0
    g = load_ply(out)
    assert len(g) == 12_000 and g.sh_degree == 3 and not list(tmp_path.glob("*.part"))
    torch.testing.assert_close(g.means, resize(trained, 12_000).means)


@pytest.mark.parametrize("args,needle", [
    (["{ply}", "{out}", "--gaussians", "lots"], "--gaussians 'lots' is not a count"),
    (["{ply}", "{tmp}/out.npz", "--gaussians", "1K"], "must be a .ply"),
    (["{tmp}/missing.ply", "{out}", "--gaussians", "1K"], "missing.ply: cannot read a model"),
])
def test_cli_bad_input_is_one_clear_line(shared, tmp_path, args, needle):
    fill = {"ply": shared / "data/scenes/inria_format_9k.ply", "out": tmp_path / "o.ply", "tmp": tmp_path}
    proc = subprocess.run([sys.executable, "-m", "gsexp.bench.grow", *[a.format(**fill) for a in args]],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*.ply"))
