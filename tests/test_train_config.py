"""Every config composes and validates; bad configs fail before any work, naming the key."""
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gsexp.config import ConfigError, force_rasterizer_switches, validate

CONF = Path(__file__).resolve().parents[1] / "conf"
OmegaConf.register_new_resolver("gsexp_run_name", lambda s, name=None: name or s or "default", replace=True)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def data_paths(shared: Path, tmp: Path) -> dict:
    (tmp / "transforms.json").write_text("{}")
    return {"blender": shared / "data/nerf_synthetic/lego", "llff": shared / "data/llff/fern",
            "colmap": shared / "data/colmap/beer", "transforms": tmp}


def compose_train(overrides, hydra: bool = False):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=force_rasterizer_switches(overrides), return_hydra_config=hydra)


@pytest.mark.parametrize("group", ["data", "model", "rasterizer", "strategy", "compress", "logger", "paths"])
def test_every_option_of_every_group_composes(group, shared, tmp_path):
    paths = data_paths(shared, tmp_path)
    for option in options(group):
        overrides = [f"{group}={option}"]
        if group == "data" and option in paths:
            overrides.append(f"data.path={paths[option]}")
        cfg = validate(compose_train(overrides))
        assert cfg.iterations > 0


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment, shared, monkeypatch):
    monkeypatch.chdir(CONF.parent)  # experiment files name data relative to the repo root
    cfg = validate(compose_train([f"experiment={experiment}"]))
    assert cfg.iterations > 0


@pytest.mark.parametrize("overrides,key", [
    (["iterations=-5"], "iterations"),
    (["iterations=abc"], "iterations"),
    (["rasterizer.blend=fast"], "rasterizer.blend"),
    (["rasterizer.precision=fp16"], "rasterizer.precision"),
    (["rasterizer.g2l=false"], "rasterizer.g2l"),  # vanilla has no G2L
    (["rasterizer.blend=gemm", "rasterizer.early_cull=false"], "rasterizer.early_cull"),  # tcgs only
    (["rasterizer=tc_gs", "rasterizer.batch=48"], "rasterizer.batch"),
    (["rasterizer=vanilla", "rasterizer.batch=32"], "rasterizer.batch"),  # vanilla has no batches
    (["rasterizer.blend=tcgs", "rasterizer.batch=32"], "rasterizer.batch"),  # nor has the reference
    (["rasterizer=tc_gs", "rasterizer.tile_split=four"], "rasterizer.tile_split"),
    (["rasterizer=tc_gs", "rasterizer.backward=gemm_tf32", "rasterizer.tile_split=quarters"], "rasterizer.tile_split"),
    (["data=blender", "data.path=/no/such/scene"], "data.path"),
    (["data=blender"], "data.path"),
    (["ssim_lambda=2"], "ssim_lambda"),
    (["compress=prune", "+compress.options.ratoi=0.5"], "compress.options"),
    (["compress=prune", "compress.options.ratio=1.5"], "compress.options"),
    (["+data.pathh=1"], "data.pathh"),
    (["+strategy.options.refine_evry=100"], "strategy.options"),
    (["strategy=budget", "strategy.options.budget=0"], "strategy.options"),
])
def test_bad_configs_name_the_key(overrides, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        validate(compose_train(overrides))


@pytest.mark.parametrize("strategy", ["default", "budget", "fastgs", "mcmc"])
def test_a_zero_interval_is_refused_not_run_every_step(strategy):
    """scaled() lifts an interval to 1 step: refine_every=0 refined every step (57K Gaussians by
    step 147 on the synthetic scene), reset_every=0 reset opacity every step."""
    with pytest.raises(ConfigError, match="refine_every must be a number of steps >= 1"):
        validate(compose_train([f"strategy={strategy}", "strategy.options.refine_every=0"]))
    if strategy != "mcmc":  # MCMC has no reset
        with pytest.raises(ConfigError, match="reset_every .* to never reset, set it at or above refine_stop"):
            validate(compose_train([f"strategy={strategy}", "strategy.options.reset_every=0"]))
    with pytest.raises(ConfigError, match="refine_start must be a number of steps >= 0"):
        validate(compose_train([f"strategy={strategy}", "strategy.options.refine_start=-1"]))
    validate(compose_train([f"strategy={strategy}", "strategy.options.refine_start=0"]))  # 0 is a step


def test_misspelled_key_and_option_fail_at_composition():
    with pytest.raises(Exception, match="iteraions"):
        compose_train(["iteraions=5"])
    with pytest.raises(Exception, match="blendr"):
        compose_train(["data=blendr"])


def test_a_switch_the_variant_lacks_names_the_variants_that_have_it():
    with pytest.raises(ConfigError, match="'rasterizer.g2l': vanilla has no switch 'g2l' "
                                          r"\(it is a switch of torch, gemm_gs, tc_gs\)"):
        validate(compose_train(["rasterizer=vanilla", "rasterizer.g2l=false"]))
    cfg = validate(compose_train(["rasterizer=tc_gs", "rasterizer.g2l=false"]))  # tc_gs has it
    assert cfg.rasterizer.g2l is False and cfg.rasterizer._target_.endswith("TcGsSettings")


def test_in_a_sweep_a_switch_the_variant_lacks_runs_once():
    """vanilla x precision: the fp32 cell runs (vanilla is fp32), the others are invalid."""
    from gsexp.errors import InvalidCombination

    cfg = validate(compose_train(["rasterizer=vanilla", "rasterizer.precision=fp32"]), sweep=True)
    assert "precision" not in cfg.rasterizer
    with pytest.raises(InvalidCombination, match="'rasterizer.precision'"):
        validate(compose_train(["rasterizer=vanilla", "rasterizer.precision=fp16"]), sweep=True)
    with pytest.raises(InvalidCombination, match="'rasterizer.precision'"):
        validate(compose_train(["rasterizer=vanilla", "rasterizer.precision=fp32"]))  # outside sweeps: strict


def test_each_rasterizer_config_has_exactly_its_variants_switches():
    import dataclasses

    from gsexp.render.settings import VARIANTS

    for name, cls in VARIANTS.items():
        keys = set(compose_train([f"rasterizer={name}"]).rasterizer) - {"_target_"}
        assert keys == {f.name for f in dataclasses.fields(cls)}, name


def test_capture_turbo_densifies_from_500_to_3000_and_never_resets():
    """The recipe that beat capture_fast on fern and beer (experiments/peers/h100_2026-12-07b_real)
    is run.sh's fast10k_d3k_nr: the config and the study must not drift apart."""
    from gsexp.train.strategy import make_strategy

    cfg = validate(compose_train(["experiment=capture_turbo"]))
    s = make_strategy(cfg.strategy.name, scene_extent=1.0, **cfg.strategy.options).scaled(cfg.iterations)
    assert (cfg.iterations, s.refine_start, s.refine_stop, s.refine_every) == (10_000, 500, 3000, 100)
    assert s.reset_every >= s.refine_stop and cfg.schedule.resolution == "none"
    assert cfg.rasterizer._target_.endswith("TcGsSettings") and cfg.rasterizer.intersect == "accutile"


def test_lego_turbo_is_lego_fast_with_a_budget_in_7k_two_view_steps():
    """The recipe measured in experiments/fast_recipes (h200_2026-12-07g's and h100_2026-12-07f's
    turbo7k_bs2, i.e. the 14K-step lego_turbo with iterations=7000 batch_size=2): lego_fast's step
    with a 2.5x budget, two views a step, every refine window scaled, no resolution schedule."""
    from gsexp.train.strategy import make_strategy

    fast = validate(compose_train(["experiment=lego_fast"]))
    cfg = validate(compose_train(["experiment=lego_turbo"]))
    s = make_strategy(cfg.strategy.name, scene_extent=1.0, **cfg.strategy.options).scaled(
        cfg.iterations, batch_size=cfg.batch_size)
    base = make_strategy(fast.strategy.name, scene_extent=1.0, **fast.strategy.options)
    assert (cfg.iterations, cfg.batch_size, cfg.strategy.name, s.budget_multiple) == (7_000, 2, "budget", 2.5)
    assert s.refine_stop == round(base.refine_stop * 7 / 30) and cfg.schedule.resolution == "none"
    assert cfg.rasterizer == fast.rasterizer and cfg.fused_adam == fast.fused_adam
    one = validate(compose_train(["experiment=lego_turbo", "iterations=14000", "batch_size=1"]))
    o = make_strategy(one.strategy.name, scene_extent=1.0, **one.strategy.options).scaled(one.iterations)
    # 12-07f/g's turbo runs, one view a step: the same refines at the same views (step x 2)
    assert (2 * s.refine_stop, 2 * s.refine_every, 2 * s.reset_every) == (o.refine_stop, o.refine_every, o.reset_every)
    assert abs(2 * s.refine_start - o.refine_start) <= 2 and s.budget_multiple == o.budget_multiple
