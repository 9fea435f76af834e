"""Compression: significance against a brute-force pixel loop, k-means, the compressed format."""
import numpy as np
import pytest
import torch

from gsexp.compress.significance import hit_counts, significance
from gsexp.compress.kmeans import kmeans
from render_helpers import naive_render, random_scene


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hits_equal_a_pixel_by_pixel_count(seed):
    g, cam = random_scene(seed, n=80, width=40, height=32)
    hits = np.zeros(len(g), dtype=np.int64)
    naive_render(g, cam, hits=hits)
    assert hits.sum() > 500
    assert np.array_equal(hit_counts(g, cam).numpy(), hits)


def test_significance_formula():
    g, cam = random_scene(3, n=60, width=40, height=32)
    cams = [cam, cam]
    hits = hit_counts(g, cam).double() * 2
    volume = g.log_scales.double().sum(-1).exp()
    v90 = np.sort(volume.numpy())[int(0.1 * (len(volume) - 1))]  # 90% of the volumes exceed it
    want = hits * g.opacities.double() * (volume / v90) ** 0.1
    assert torch.allclose(significance(g, cams, beta=0.1), want, rtol=0.05)  # quantile interpolation
    assert torch.equal(significance(g, cams, beta=0.0), hits * g.opacities.double())


def test_kmeans_error_falls_as_the_codebook_grows():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4000, 45, generator=gen) * torch.linspace(0.1, 1.0, 45)
    errors = []
    for k in (16, 64, 256, 1024):
        codes, idx = kmeans(x, k, iterations=8)
        errors.append(((x - codes[idx]) ** 2).sum(1).mean().item())
    assert all(a > b for a, b in zip(errors, errors[1:])), errors
    codes, idx = kmeans(x[:50], 100)  # more codes than points: exact
    assert torch.allclose(codes[idx], x[:50])


def test_kmeans_weights_pull_codes():
    x = torch.tensor([[0.0], [1.0], [10.0]])
    codes, idx = kmeans(x, 1, weights=torch.tensor([1.0, 1.0, 0.0]))
    assert codes[0, 0] == pytest.approx(0.5)


def test_format_round_trip_with_and_without_vq(tmp_path):
    from gsexp.compress import format as fmt

    g, _ = random_scene(4, n=300, width=40, height=32, sh_degree=3)
    fmt.save(tmp_path / "a.npz", fmt.encode(g))
    plain = fmt.load(tmp_path / "a.npz")
    assert len(plain) == 300 and plain.sh_degree == 3
    assert torch.equal(plain.means, g.means)  # positions kept in fp32
    for name in ("log_scales", "quats", "opacity_logits", "sh"):
        a, b = getattr(plain, name), getattr(g, name)
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-3), name  # fp16

    mask = torch.arange(300) % 3 != 0
    codes, idx = kmeans(g.sh[mask, 1:].reshape(int(mask.sum()), -1), 32)
    size = fmt.save(tmp_path / "b.npz", fmt.encode(g, mask, codes, idx))
    back = fmt.load(tmp_path / "b.npz")
    assert torch.allclose(back.sh[mask, 1:].reshape(int(mask.sum()), -1), codes[idx], atol=1e-3)
    assert torch.allclose(back.sh[~mask], g.sh[~mask], atol=1e-3)
    assert size < (tmp_path / "a.npz").stat().st_size / 2**20  # the codebook is smaller
    with pytest.raises(ValueError, match="codebook"):
        fmt.encode(g, mask, codes, idx[:5])

    g.means[0] = torch.tensor([-40.0, 3.0, 9.0])  # an outlier stretches the grid
    size16 = fmt.save(tmp_path / "c.npz", fmt.encode(g, mask, codes, idx, position_bits=16))
    back = fmt.load(tmp_path / "c.npz")
    step = (g.means.max(0).values - g.means.min(0).values) / 65535
    assert ((back.means - g.means).abs() <= step / 2 + 1e-6).all()
    assert not torch.equal(back.means, g.means)
    assert size16 < size
    with pytest.raises(ValueError, match="position_bits"):
        fmt.encode(g, position_bits=8)
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        fmt.load(tmp_path / "nope.npz")


@pytest.mark.slow
def test_training_with_prune_vq_writes_a_smaller_file(tmp_path):
    import json

    from gsexp.compress import format as fmt
    from test_train_run import TINY, run_train

    tiny = [o for o in TINY if not o.startswith("model.sh_degree")] + ["model.sh_degree=2"]
    run_train([*tiny, "iterations=45", "compress=prune_vq", "compress.options.codes=32"], tmp_path / "c")
    run_train([*tiny, "iterations=45"], tmp_path / "plain")
    (c_dir,) = [p.parent for p in (tmp_path / "c").rglob("summary.json")]
    (p_dir,) = [p.parent for p in (tmp_path / "plain").rglob("summary.json")]
    c, p = (json.loads((d / "summary.json").read_text()) for d in (c_dir, p_dir))
    assert c["status"] == "ok" and c["psnr"] > 5
    assert c["num_gaussians"] == pytest.approx(0.34 * p["num_gaussians"], abs=2)  # 66% pruned at step 38
    assert c["size_mb"] == pytest.approx((c_dir / "compressed.npz").stat().st_size / 2**20)
    assert c["size_mb"] < p["size_mb"] / 5
    g = fmt.load(c_dir / "compressed.npz")
    assert len(g) == c["num_gaussians"] and g.sh_degree == 2
    # the model before the VQ and fp16 is evaluated too; with 32 codes the VQ must cost something
    assert c["uncompressed"]["psnr"] > 5 and c["uncompressed"]["psnr"] != c["psnr"]
    assert p["uncompressed"] is None


@pytest.mark.slow
def test_mask_removes_gaussians_during_training(tmp_path):
    import json

    from test_train_run import TINY, run_train

    run_train([*TINY, "iterations=120", "model.init=random", "model.num_random=600", "compress=mask",
               "compress.options.lam=1", "compress.options.lr=0.1"], tmp_path)
    (path,) = tmp_path.rglob("summary.json")
    s = json.loads(path.read_text())
    assert s["status"] == "ok" and s["psnr"] > 5
    assert 100 < s["num_gaussians"] < 600  # a random cloud, no densification: the mask drops some


def test_prune_rounds_remove_ratio_in_all():
    from gsexp.compress import make_compression

    one = make_compression("prune", ratio=0.66, at_step=25000)
    assert one.steps() == (25000,) and one.share() == 0.66
    three = make_compression("prune", ratio=0.875, at_step=[15000, 20000, 25000])
    assert three.share() == pytest.approx(0.5)  # 0.5 of what is left, three times: 1/8 stays
    assert three.scaled(3000).steps() == (1500, 2000, 2500)
    assert three.scaled(2).steps() == (1, 2)  # rounds that fall on the same step merge
    for bad in ([20000, 15000], [0], [15000, 15000], "25000"):
        with pytest.raises(ValueError, match="at_step"):
            make_compression("prune", at_step=bad)
    with pytest.raises(ValueError, match="fraction"):
        make_compression("prune_vq", fraction=1.5)  # before any training, not at its end


@pytest.mark.slow
def test_training_prunes_in_rounds(tmp_path):
    import json

    from test_train_run import TINY, run_train

    run_train([*TINY, "iterations=45", "compress=prune", "compress.options.at_step=[15000,25000]"], tmp_path / "c")
    run_train([*TINY, "iterations=45"], tmp_path / "plain")
    c, p = (json.loads(next((tmp_path / d).rglob("summary.json")).read_text()) for d in ("c", "plain"))
    assert c["status"] == "ok"
    assert c["num_gaussians"] == pytest.approx(0.34 * p["num_gaussians"], abs=3)  # two rounds of 41.7%


def test_vq_at_a_step_holds_the_quantised_rows_through_adam():
    """At vq_step the least significant rows become their codes and their Adam moments zero;
    gradients on them are dropped from then on, so Adam leaves them exactly where they are
    while the rest trains. finalize stores exactly those codes."""
    from gsexp.compress import VQ_CODE, make_compression
    from gsexp.compress import format as fmt
    from gsexp.gaussians.params import make_params
    from gsexp.train.params import make_optimizers

    g, cam = random_scene(3, n=400, width=48, height=40, sh_degree=2)
    params = {k: torch.nn.Parameter(v) for k, v in make_params(g).items()}
    optimizers = make_optimizers(params, 1.0)
    vq = make_compression("vq", codes=16, fraction=0.5, vq_step=2)
    state = {}

    def train_step(step):
        loss = sum((p ** 2).sum() for p in params.values())  # any loss that moves every row
        loss.backward()
        vq.post_backward(params, state)
        for opt in optimizers.values():
            opt.step()
            opt.zero_grad(set_to_none=True)
        vq.step(params, optimizers, state, step, [cam])

    train_step(0)
    assert VQ_CODE not in state
    train_step(1)  # step + 1 == vq_step: quantise
    code = state[VQ_CODE]
    frozen = code > 0
    assert frozen.sum() == 200 and len(torch.unique(code[frozen])) <= 16
    held = params["shN"].detach().clone()
    for step in range(2, 6):
        train_step(step)
    assert torch.equal(params["shN"][frozen], held[frozen])
    assert not torch.equal(params["shN"][~frozen], held[~frozen])
    arrays = vq.finalize(params, [cam], 2, state)
    back = fmt.decode(arrays)
    assert torch.allclose(back.sh[frozen, 1:], held[frozen].half().float())
    assert arrays["vq_mask"].sum() == 200 and len(arrays["codebook"]) == len(torch.unique(code[frozen]))


def test_vq_step_must_follow_the_prunes():
    from gsexp.compress import make_compression

    with pytest.raises(ValueError, match="vq_step"):
        make_compression("prune_vq", at_step=25000, vq_step=20000)
    with pytest.raises(ValueError, match="vq_step"):
        make_compression("vq", vq_step=0)
    both = make_compression("prune_vq", at_step=[15000, 20000], vq_step=28000).scaled(3000)
    assert both.steps() == (1500, 2000) and both.vq_step == 2800


@pytest.mark.slow
def test_training_with_vq_at_a_step_stores_what_it_trained(tmp_path):
    """Quantised at step 36 of 45, then fine-tuned: the stored model is the trained one up to
    fp16, so the compressed and uncompressed evaluations agree."""
    import json

    from test_train_run import TINY, run_train

    tiny = [o for o in TINY if not o.startswith("model.sh_degree")] + ["model.sh_degree=2"]
    run_train([*tiny, "iterations=45", "compress=vq", "compress.options.codes=32", "compress.options.vq_step=24000",
               "compress.options.fraction=1.0", "compress.options.position_bits=16"], tmp_path)
    (path,) = tmp_path.rglob("summary.json")
    s = json.loads(path.read_text())
    print(s["psnr"], s["uncompressed"])
    assert s["status"] == "ok" and s["psnr"] > 5
    assert abs(s["psnr"] - s["uncompressed"]["psnr"]) < 0.05
