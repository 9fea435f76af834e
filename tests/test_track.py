"""Tests for gsexp.track: local files, W&B in offline mode only (never the network), helpers."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from gsexp.track import (LocalLogger, Logger, MultiLogger, make_logger, run_name_from_overrides,
                         tags_from_choices)
from gsexp.track.wandb import resolve_mode


@pytest.fixture
def wandb_offline(monkeypatch, tmp_path):
    """Offline and silent, with W&B's own config/cache folders kept out of $HOME."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / var.lower()))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def test_local_logger_jsonl(tmp_path):
    lg = LocalLogger(tmp_path)
    lg.log({"loss": torch.tensor(0.25), "n": np.int64(7), "lr": np.float32(0.5), "ok": np.bool_(True)}, step=1)
    lg.log({"loss": float("nan"), "grad": float("inf"), "neg": float("-inf")}, step=2)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0] == {"step": 1, "loss": 0.25, "n": 7, "lr": 0.5, "ok": 1}
    assert isinstance(rows[0]["n"], int)
    assert rows[1]["step"] == 2 and math.isnan(float(rows[1]["loss"]))
    assert float(rows[1]["grad"]) == math.inf and float(rows[1]["neg"]) == -math.inf


def test_local_logger_rejects_bad_values(tmp_path):
    lg = LocalLogger(tmp_path)
    with pytest.raises(TypeError, match="loss"):
        lg.log({"loss": torch.zeros(3)}, step=0)
    with pytest.raises(TypeError, match="name"):
        lg.log({"name": "x"}, step=0)
    with pytest.raises(ValueError, match="step"):
        lg.log({"step": 3}, step=0)


def test_local_logger_images(tmp_path):
    img = torch.zeros(3, 4, 5)
    img[0] = 1.0
    img[1, 0, 0] = 2.0  # out of range: clamped
    LocalLogger(tmp_path).log_image("val/render", img, step=42)
    path = tmp_path / "renders" / "val_render_000042.png"
    arr = np.asarray(Image.open(path))
    assert arr.shape == (4, 5, 3) and arr.dtype == np.uint8
    assert (arr[..., 0] == 255).all() and arr[0, 0, 1] == 255 and arr[1, 1, 1] == 0
    with pytest.raises(ValueError, match=r"\[3,H,W\]"):
        LocalLogger(tmp_path).log_image("bad", torch.zeros(4, 5), step=0)


def test_local_logger_summary_merges_atomically(tmp_path, monkeypatch):
    lg = LocalLogger(tmp_path)
    lg.summary({"psnr": torch.tensor(30.5), "rasterizer": "tcgs", "lpips": None})
    lg.summary({"ssim": np.float32(0.5), "psnr": 31.0, "loss": float("nan"),
                "per_view": [{"view": "r_0", "psnr": 29.0}], "stage_ms": {"render": 1.5}})
    assert json.loads((tmp_path / "summary.json").read_text()) == {
        "psnr": 31.0, "rasterizer": "tcgs", "lpips": None, "ssim": 0.5, "loss": "nan",
        "per_view": [{"view": "r_0", "psnr": 29.0}], "stage_ms": {"render": 1.5}}
    # A failed write leaves the previous summary.json and no temp file behind.
    import gsexp.track.local as local

    def broken_dump(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(local.json, "dump", broken_dump)
    with pytest.raises(OSError):
        lg.summary({"lpips": 0.1})
    monkeypatch.undo()
    assert json.loads((tmp_path / "summary.json").read_text())["psnr"] == 31.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    # Another process (a resumed run) merges into the same file.
    LocalLogger(tmp_path).summary({"lpips": 0.1})
    assert json.loads((tmp_path / "summary.json").read_text())["lpips"] == 0.1
    assert json.loads((tmp_path / "summary.json").read_text())["rasterizer"] == "tcgs"


def test_multi_logger_fans_out_and_finishes_all():
    calls = []

    class Recorder(Logger):
        def __init__(self, name, fail=False):
            self.name, self.fail = name, fail

        def log(self, metrics, step):
            calls.append((self.name, "log", step))

        def finish(self, status="ok"):
            calls.append((self.name, "finish", status))
            if self.fail:
                raise RuntimeError(self.name)

    multi = MultiLogger(Recorder("a", fail=True), Recorder("b"))
    multi.log({"x": 1}, step=3)
    with pytest.raises(RuntimeError, match="a"):
        multi.finish("error")
    assert calls == [("a", "log", 3), ("b", "log", 3), ("a", "finish", "error"), ("b", "finish", "error")]

    calls.clear()
    with Recorder("ok"):
        pass
    with pytest.raises(KeyError):
        with Recorder("bad"):
            raise KeyError("boom")
    assert calls == [("ok", "finish", "ok"), ("bad", "finish", "error")]


def test_import_does_not_load_wandb():
    code = "import sys, gsexp.track; assert 'wandb' not in sys.modules, 'wandb imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_make_logger_kinds(tmp_path):
    assert type(make_logger("none", tmp_path, project="ignored")) is LocalLogger
    with pytest.raises(ValueError, match="wandb, none"):
        make_logger("tensorboard", tmp_path)


def test_resolve_mode(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert resolve_mode() == "offline"
    assert resolve_mode("disabled") == "disabled"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert resolve_mode("online") == "offline"


def test_wandb_logger_offline(tmp_path, wandb_offline):
    logger = make_logger("wandb", tmp_path, name="rasterizer=tcgs", group="g", tags=["data:synthetic"],
                         config={"model": {"sh_degree": 3}, "iterations": 10})
    local, wb = logger.loggers
    run = wb.run
    assert run.settings.mode == "offline"
    assert run.name == "rasterizer=tcgs" and run.group == "g" and list(run.tags) == ["data:synthetic"]
    assert run.config["model"]["sh_degree"] == 3
    with logger:
        logger.log({"loss": torch.tensor(0.5)}, step=1)
        logger.log_image("val/render", torch.rand(3, 8, 8), step=1)
        logger.log({"loss": 0.25}, step=2)  # step 1 is committed once step 2 begins
        logger.summary({"psnr": 30.5, "lpips": None, "per_view": [{"view": "r_0", "psnr": 29.0}]})
        assert run.summary["loss"] == 0.5 and run.summary["psnr"] == 30.5
        assert run.summary["per_view"][0]["view"] == "r_0"

    offline_dirs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline_dirs) == 1
    run_dir = offline_dirs[0]
    assert (run_dir / f"run-{run.id}.wandb").stat().st_size > 0
    assert list((run_dir / "files" / "media" / "images").glob("val/render_1_*.png"))
    assert (tmp_path / "renders" / "val_render_000001.png").is_file()
    assert json.loads((tmp_path / "summary.json").read_text())["psnr"] == 30.5
    logger.finish()  # a second finish is harmless


def test_run_name_from_overrides():
    assert run_name_from_overrides([]) == "default"
    assert run_name_from_overrides(["rasterizer=tcgs", "iterations=100"]) == "rasterizer=tcgs,iterations=100"
    assert run_name_from_overrides(["data=blender/lego", "hydra.run.dir=/x", "+tag=a b"]) == \
        "data=blender_lego,+tag=a_b"
    assert run_name_from_overrides(["hydra/launcher=basic"]) == "default"
    long = run_name_from_overrides([f"k{i}=v{i}" for i in range(100)])
    assert len(long) == 120 and long != run_name_from_overrides([f"k{i}=v{i}" for i in range(101)])


def test_tags_from_choices():
    choices = {"data": "synthetic", "rasterizer": "torch", "hydra/launcher": "basic",
               "hydra/output": "default", "strategy": None}
    assert tags_from_choices(choices) == ["data:synthetic", "rasterizer:torch"]


def test_wandb_logger_init_args_and_exit_code(tmp_path, monkeypatch):
    """What reaches wandb.init and run.finish, with a stand-in run (no wandb process at all)."""
    import wandb

    seen = {}

    class FakeRun:
        def finish(self, exit_code=None):
            seen.setdefault("exit_codes", []).append(exit_code)

    def fake_init(**kwargs):
        seen["init"] = kwargs
        return FakeRun()

    monkeypatch.setattr(wandb, "init", fake_init)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    from gsexp.track import WandbLogger

    with pytest.raises(RuntimeError):
        with WandbLogger(tmp_path, mode="online", tags=("a", "", "x" * 70), config={"k": 1}):
            raise RuntimeError("training failed")
    kw = seen["init"]
    assert kw["mode"] == "disabled" and kw["reinit"] == "create_new" and kw["dir"] == str(tmp_path)
    assert kw["tags"] == ["a", "x" * 64] and kw["project"] == "gsexp" and kw["job_type"] == "train"
    assert seen["exit_codes"] == [1]
