"""A user's mistakes on the command lines (issue 37): one line, exit 2, the close matches;
run-folder paths with '=' taken as paths; the small CLI defects."""
import json
import os
import subprocess
import sys

import pytest
import torch
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


@pytest.mark.parametrize("argv", [["-m", "strategy=glob(*)"], ["-m", "seed=range(0,3)", "strategy=default,mcmc"],
                                  ["-m", "+data.options.extra=1,2"], ["--cfg", "job", "seed=1"]])
def test_valid_overrides_pass_the_check(argv):
    overrides.check(argv)  # glob: left to Hydra's sweeper, which lists it


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


def test_build_help_prints_usage_and_builds_nothing(tmp_path):
    env = {**os.environ, "GSEXP_BUILD_DIR": str(tmp_path / "build")}
    proc = subprocess.run([sys.executable, "-m", "gsexp.render.cuda.build", "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stdout + proc.stderr
    assert not (tmp_path / "build").exists()


@pytest.fixture
def bare_ply(tmp_path):
    g, _ = random_scene(0, n=50, sh_degree=0)
    save_ply(g, tmp_path / "model.ply")
    return tmp_path / "model.ply"


def test_view_takes_up_minus_y_and_says_a_bare_ply_comes_alone(bare_ply, monkeypatch, capsys):
    from gsexp.view import __main__ as view
    from gsexp.view import server

    opened = {}

    class NoServer:  # everything up to serving, without binding a port
        url = "http://test"

        def __init__(self, source, **kwargs):
            opened.update(kwargs, source=source)

    monkeypatch.setattr(server, "Viewer", NoServer)
    monkeypatch.setattr(server, "serve_forever", lambda viewer: None)
    assert view.main([str(bare_ply), "--up", "-y", "--device", "cpu"]) == 0
    assert list(opened["up"]) == [0.0, -1.0, 0.0] and opened["source"].train_cameras == []
    out = capsys.readouterr().out
    assert "its run's scene" not in out and "alone (no run config beside it, so no cameras; up -y" in out


def test_bench_cuda_rasterizer_on_a_cpu_machine_is_one_line(bare_ply, capsys):
    if torch.cuda.is_available():
        pytest.skip("checks a machine without a GPU")
    from gsexp.bench.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--ply", str(bare_ply), "--rasterizers", "vanilla"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "needs a GPU" in err and "use --rasterizers torch" in err


def test_bench_takes_up_minus_y(bare_ply):
    from gsexp.bench.cli import main

    report = main(["--ply", str(bare_ply), "--up", "-y", "--width", "32", "--height", "24", "--num-cameras", "1",
                   "--warmup", "0", "--frames", "1", "--device", "cpu", "--rasterizers", "torch", "--no-gsplat"])
    assert report["config"]["cameras"]["up"] == [0.0, -1.0, 0.0]


def test_dashboard_refuses_a_single_run_and_writes_nothing(tmp_path, capsys):
    from gsexp.dashboard import main

    run = tmp_path / "runs" / "default"
    (run / ".hydra").mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "ok", "psnr": 30.0}))
    before = sorted(run.rglob("*"))
    with pytest.raises(SystemExit) as exit_:
        main([str(run)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1 and "not a sweep" in err, err
    assert sorted(run.rglob("*")) == before


def test_dashboard_on_a_folder_without_jobs_writes_no_results_csv(tmp_path):
    from gsexp.dashboard import main

    with pytest.raises(SystemExit):
        main([str(tmp_path)])
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("fmt,out", [("splat", "x.ply"), ("ply", "x.splat"), ("ply", "x.compressed.ply")])
def test_export_refuses_a_format_its_file_name_contradicts(bare_ply, tmp_path, capsys, fmt, out):
    from gsexp.export import main

    assert main([str(bare_ply), "--format", fmt, "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "disagree" in err, err
    assert not (tmp_path / out).exists()
