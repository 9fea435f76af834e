"""A user's mistakes on the command lines (issue 37): one line, exit 2, the close matches;
run-folder paths with '=' taken as paths."""
import json

import pytest
from omegaconf import OmegaConf

from gsexp import overrides
from gsexp.config import validate
from gsexp.errors import ConfigError
from gsexp.gaussians import save_ply
from render_helpers import random_scene
from test_train_run import REPO, TINY, run_train


def error_of(argv: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        overrides.check(overrides.quote_paths(argv))
    return str(err.value)


def only_line(proc) -> str:
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("argv,says", [
    (["itrations=100"], "did you mean iterations?"),
    (["dataa=x"], "did you mean data?"),
    (["data.options.widht=3"], "no such key in data.options; did you mean width?"),
    (["rasterizer=foo"], "no option 'foo' in conf/rasterizer/; the options are gemm_gs, tc_gs, torch, vanilla"),
    (["strategy=mcmcc"], "no option 'mcmcc' in conf/strategy/; did you mean mcmc?"),
    (["-m", "strategy=default,mcmcc"], "did you mean mcmc?"),      # every swept value is composed
    (["-m", "seed=0,1", "itrations=3"], "did you mean iterations?"),
])
def test_a_key_or_option_typo_names_the_close_matches_without_hydras_plus_advice(argv, says):
    message = error_of(argv)
    assert says in message and "+itrations" not in message and "\n" not in message, message


@pytest.mark.parametrize("flags", [[], ["-m"]])
def test_train_py_reports_a_hydra_composition_error_in_one_line_exit_2_leaving_nothing(tmp_path, flags):
    proc = run_train([*flags, *TINY, "itrations=5", "seed=0,1" if flags else "seed=0"], tmp_path, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "did you mean iterations?" in only_line(proc)
    assert not list(tmp_path.iterdir())  # no run folder, no sweep folder


def test_a_run_folder_path_with_equals_is_taken_as_model_ply(tmp_path):
    g, _ = random_scene(0, n=100, sh_degree=1)
    ply = tmp_path / "runs" / "device=cpu,seed=1" / "point_cloud.ply"  # as train.py names run folders
    ply.parent.mkdir(parents=True)
    save_ply(g, ply)
    proc = run_train([*TINY, "iterations=2", "eval_every=0", "model.init=ply", f"model.ply={ply}", "name=tuned"],
                     tmp_path)
    summary = json.loads((tmp_path / "runs" / "tuned" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["num_gaussians"] == len(g), proc.stdout


def test_a_value_with_equals_elsewhere_says_how_to_quote_it():
    message = error_of(["name=a=b"])
    assert "cannot be parsed" in message and """'name="a=b"'""" in message


@pytest.mark.parametrize("word,rgb", [("white", [1.0, 1.0, 1.0]), ("black", [0.0, 0.0, 0.0])])
def test_background_by_name(word, rgb):
    cfg = OmegaConf.create({"data": {"kind": "synthetic", "background": [0.0, 0.0, 0.0]}})
    cfg.data.background = word
    OmegaConf.set_struct(cfg, True)  # as Hydra hands it over
    assert list(validate(cfg).data.background) == rgb


def test_an_unknown_background_name_points_to_the_list_form():
    with pytest.raises(ConfigError, match=r"data\.background.*\[1,1,1\]"):
        validate(OmegaConf.create({"data": {"background": "grey"}}))
