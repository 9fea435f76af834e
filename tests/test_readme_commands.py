"""Every `python train.py` line in the README composes and validates, in every cell of its sweep:
what a user copies must not fail on a config error (a GPU, where asked, is the machine's matter)."""
from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import open_dict

from gsexp.config import force_rasterizer_switches, validate
from gsexp.overrides import compose, quote_paths

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_train_lines() -> list[str]:
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip().startswith("python train.py"):
                lines.append(line.split("#")[0].strip())
    return lines


def cells(args: list[str]) -> list[list[str]]:
    """A multirun's jobs (the cartesian product of its swept values); otherwise the one run."""
    multirun = "-m" in args or "--multirun" in args
    args = [a for a in args if a not in ("-m", "--multirun")]
    if not multirun:
        return [args]
    parsed = OverridesParser.create().parse_overrides(args)
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
               else [o.input_line] for o in parsed]
    return [list(c) for c in itertools.product(*choices)]


LINES = readme_train_lines()


def test_the_readme_has_its_train_lines():
    assert len(LINES) >= 10 and any("-m" in line.split() for line in LINES)


@pytest.mark.parametrize("line", LINES)
def test_readme_train_line_composes_in_every_cell(line, tmp_path):
    args = shlex.split(line)[2:]
    (tmp_path / "mine").mkdir()  # the placeholders' paths: a user's own scene and model
    (tmp_path / "model.ply").touch()
    args = [a.replace("run/point_cloud.ply", str(tmp_path / "model.ply")).replace("scenes/mine", str(tmp_path / "mine"))
            for a in args]
    jobs = cells(args)
    for cell in jobs:
        cfg = compose(force_rasterizer_switches(quote_paths(cell)), "train")
        with open_dict(cfg):
            cfg.pop("hydra")  # train.py's cfg, as @hydra.main hands it over
        validate(cfg, sweep=len(jobs) > 1)
