"""Tests for gsexp.train.checkpoint: atomic saves, latest/keep_last, corrupt files, RNG state
and a trainer-shaped payload loading with weights_only=True."""

import io
import random

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from gsexp.train.checkpoint import (latest_checkpoint, load_checkpoint, rng_state, save_checkpoint,
                                    set_rng_state)


def names(run_dir):
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir())


def test_crash_mid_write_keeps_previous(tmp_path, monkeypatch):
    first = save_checkpoint(tmp_path, 100, {"w": torch.arange(1000.0)})
    real_save = torch.save

    def half_then_crash(obj, f, *args, **kwargs):
        buf = io.BytesIO()
        real_save(obj, buf)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", half_then_crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 200, {"w": torch.zeros(1000)})
    monkeypatch.undo()
    assert names(tmp_path) == ["step_000100.pt"]  # no step_000200.pt, no temp file
    assert latest_checkpoint(tmp_path) == first
    assert torch.equal(load_checkpoint(first)["w"], torch.arange(1000.0))


def test_latest_ignores_temp_files_and_picks_highest_step(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for step in (5, 1200, 40):
        save_checkpoint(tmp_path, step, {"step": step}, keep_last=None)
    # A process killed mid-save leaves a temp file behind; it is never a candidate.
    (tmp_path / "checkpoints" / ".step_999999.pt.abc.tmp").write_bytes(b"partial")
    (tmp_path / "checkpoints" / "notes.txt").write_text("x")
    assert latest_checkpoint(tmp_path).name == "step_001200.pt"
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 1200
    # ... and the next save clears it away.
    save_checkpoint(tmp_path, 1300, {}, keep_last=None)
    assert ".step_999999.pt.abc.tmp" not in names(tmp_path)


def test_keep_last(tmp_path):
    for step in range(1, 6):
        save_checkpoint(tmp_path, step * 10, {"step": step}, keep_last=2)
    assert names(tmp_path) == ["step_000040.pt", "step_000050.pt"]
    # A resumed run saving a lower step than existing ones keeps the file it just wrote.
    save_checkpoint(tmp_path, 45, {}, keep_last=2)
    assert names(tmp_path) == ["step_000045.pt", "step_000050.pt"]
    save_checkpoint(tmp_path, 60, {}, keep_last=None)
    assert len(names(tmp_path)) == 3
    with pytest.raises(ValueError, match="keep_last"):
        save_checkpoint(tmp_path, 70, {}, keep_last=0)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_checkpoint_raises_value_error(tmp_path, damage):
    path = save_checkpoint(tmp_path, 7, {"w": torch.randn(100)})
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"not a checkpoint" * 8, "empty": b""}[damage])
    with pytest.raises(ValueError, match="step_000007.pt") as info:
        load_checkpoint(path)
    assert "older checkpoint" in str(info.value) and "Delete" in str(info.value)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")


def test_unsafe_payload_refused_at_save(tmp_path):
    save_checkpoint(tmp_path, 1, {"ok": 1})
    with pytest.raises(TypeError, match="weights_only"):
        save_checkpoint(tmp_path, 2, {"array": np.zeros(3)})
    assert names(tmp_path) == ["step_000001.pt"]


def draw():
    out = [random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), np.random.randn(), torch.rand(4)]
    if torch.cuda.is_available():
        out.append(torch.rand(4, device="cuda").cpu())
    return out


def test_rng_state_round_trip(tmp_path):
    if torch.cuda.is_available():
        torch.cuda.init()  # rng_state() reads the CUDA generators only once CUDA has started
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # leaves a cached Gaussian in Python's state
    np.random.randn()
    state = rng_state()
    path = save_checkpoint(tmp_path, 1, {"rng": state})
    expected = draw()

    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    draw()
    set_rng_state(load_checkpoint(path)["rng"])
    got = draw()
    assert got[:4] == expected[:4]
    for a, b in zip(got[4:], expected[4:]):
        assert torch.equal(a, b)


def test_trainer_payload_round_trip(tmp_path):
    params = {"means": torch.nn.Parameter(torch.randn(10, 3)), "sh0": torch.nn.Parameter(torch.randn(10, 1, 3))}
    optimizers = {k: torch.optim.Adam([{"params": [p], "lr": 1e-3, "name": k}], eps=1e-15) for k, p in params.items()}
    (params["means"].square().sum() + params["sh0"].sum()).backward()
    for opt in optimizers.values():
        opt.step()
    cfg = OmegaConf.create({"iterations": 100, "lr": 1.5e-4, "tags": ["a", "b"], "data": {"kind": "synthetic",
                            "path": None}, "name": "${data.kind}_run", "eval_lpips": "auto", "flag": True})
    payload = {
        "step": 100,
        "order": torch.tensor([3, 1, 2]),
        "params": {k: v.detach() for k, v in params.items()},
        "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
        "strategy": {"grad2d": torch.rand(10), "count": torch.zeros(10, dtype=torch.int32), "refine_every": 100},
        "rng": rng_state(),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    path = save_checkpoint(tmp_path, 100, payload)
    loaded = torch.load(path, map_location="cpu", weights_only=True)  # what load_checkpoint does
    assert loaded["step"] == 100 and loaded["config"]["name"] == "synthetic_run"
    assert loaded["config"] == payload["config"]
    for k in params:
        assert torch.equal(loaded["params"][k], payload["params"][k])
        new_p = torch.nn.Parameter(loaded["params"][k].clone())
        opt = torch.optim.Adam([{"params": [new_p], "lr": 0.0, "name": k}], eps=1e-15)
        opt.load_state_dict(loaded["optimizers"][k])
        state = opt.state[new_p]
        assert torch.equal(state["exp_avg"], optimizers[k].state[params[k]]["exp_avg"])
        assert float(state["step"]) == 1.0 and opt.param_groups[0]["lr"] == 1e-3
    assert loaded["strategy"]["refine_every"] == 100 and loaded["strategy"]["count"].dtype == torch.int32
    set_rng_state(loaded["rng"])
