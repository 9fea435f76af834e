"""experiments/real_captures/pose_drift.py: the shared part of a pose_opt run's corrections, and its
test views as scored, moved by that shared motion, and each aligned to its photo."""
import json
import math
import shutil
import sys

import torch

from test_pose import SETTINGS, corrected, scene
from test_train_run import REPO, TINY, run_train

sys.path.insert(0, str(REPO / "experiments" / "real_captures"))
import pose_drift  # noqa: E402

from gsexp.render import render  # noqa: E402
from gsexp.train.pose import PoseCorrection  # noqa: E402


def test_a_motion_every_camera_shares_is_found_whole():
    s, _ = scene()
    cams = s.train_cameras[:4]
    w, b = torch.tensor([0.01, -0.02, 0.015], dtype=torch.float64), torch.tensor([0.03, 0.01, -0.02], dtype=torch.float64)
    pose = PoseCorrection(cams, "cpu")
    with torch.no_grad():
        pose.delta.copy_(torch.stack([pose_drift.delta_for(c, w, b) for c in cams]))
    for i in range(len(cams)):  # each camera's correction is that one world motion
        a_i, b_i, _ = pose.world_motion(i)
        assert torch.allclose(a_i.double(), torch.linalg.matrix_exp(pose_drift.skew(w)), atol=1e-5)
        assert torch.allclose(b_i.double(), b, atol=1e-5)
    d = pose_drift.shared_motion(pose, len(cams))
    assert torch.allclose(d["w"], w, atol=1e-5) and torch.allclose(d["b"], b, atol=1e-5)
    assert math.isclose(d["shared_rotation_deg"], math.degrees(w.norm()), rel_tol=1e-3)
    assert math.isclose(d["shared_rotation_deg"], d["mean_rotation_deg"], rel_tol=1e-3)
    assert math.isclose(d["shared_b"], float(b.norm()), rel_tol=1e-3) and math.isclose(d["shared_b"], d["mean_b"], rel_tol=1e-3)
    assert d["mean_centre_shift"] > 0.01  # each centre moves by the motion (by how much depends on where it is)


def test_opposite_corrections_share_nothing():
    s, _ = scene()
    cams = s.train_cameras[:2]
    w, b = torch.tensor([0.02, 0.0, -0.01], dtype=torch.float64), torch.tensor([0.0, 0.04, 0.01], dtype=torch.float64)
    pose = PoseCorrection(cams, "cpu")
    with torch.no_grad():
        pose.delta.copy_(torch.stack([pose_drift.delta_for(cams[0], w, b), pose_drift.delta_for(cams[1], -w, -b)]))
    d = pose_drift.shared_motion(pose, 2)
    assert d["shared_rotation_deg"] < 1e-4 and d["shared_b"] < 1e-5
    assert d["mean_rotation_deg"] > 1.0 and d["mean_b"] > 0.04


def test_aligning_a_test_view_undoes_its_pose_error():
    s, g = scene()
    cam = s.train_cameras[0]
    target = render(g, cam, SETTINGS).image
    wrong = corrected(cam, torch.tensor([0.03, -0.02, 0.02, 0.04, 0.03, -0.03]))  # the SfM error
    pose = PoseCorrection([wrong], "cpu", lr=2e-3, reg=0.0)
    before = pose_drift.views(g, pose, [wrong], [target], SETTINGS, (0.0, 0.0, 0.0))[0]
    pose_drift.align(g, pose, [wrong], [target], SETTINGS, (0.0, 0.0, 0.0), steps=150)
    after = pose_drift.views(g, pose, [wrong], [target], SETTINGS, (0.0, 0.0, 0.0))[0]
    assert after > before + 6, (before, after)


def test_a_pose_opt_run_end_to_end(tmp_path, capsys):
    """On a trained run: its as-scored test PSNR is its summary's, the JSON names every figure."""
    run_train([*TINY, "iterations=40", "pose_opt=true", "pose_opt_lr=1e-3", "name=posed", "eval_every=0"], tmp_path)
    run = tmp_path / "runs" / "posed"
    out = tmp_path / "drift.json"
    assert pose_drift.main([str(run), "--align-steps", "3", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    summary = json.loads((run / "summary.json").read_text())
    assert math.isclose(r["mean_psnr"]["as_scored"], summary["psnr"], abs_tol=1e-3)
    assert r["train_cameras"] > 0 and len(r["psnr_aligned"]) == len(r["test_views"]) == summary["eval_views"]
    assert 0 < r["mean_rotation_deg"] and r["shared_rotation_deg"] <= r["mean_rotation_deg"] + 1e-9
    assert all(math.isfinite(v) for k in ("psnr_shared_motion", "psnr_aligned") for v in r[k])
    assert pose_drift.main([str(tmp_path)]) == 2  # not a run directory: one line, no traceback
    bare = tmp_path / "bare"  # the run's config without its checkpoints
    shutil.copytree(run / ".hydra", bare / ".hydra")
    assert pose_drift.main([str(bare)]) == 2
    assert "no checkpoint with pose corrections" in capsys.readouterr().err
