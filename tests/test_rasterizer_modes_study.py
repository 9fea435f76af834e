"""experiments/rasterizer_modes (issue 38): defaults_unchanged.py's comparison passes equal runs
and runs that differ only as atomics do, and fails a changed forward or a gradient beyond the
bound; its scenes are the same in every process (seeded on the CPU); modes_table.py reads a session's
folder, parts missing shown as dashes."""
import json
import sys

import torch

from test_train_run import REPO

sys.path.insert(0, str(REPO / "experiments" / "rasterizer_modes"))
import defaults_unchanged as du  # noqa: E402
import modes_table  # noqa: E402


def run(seed=0):
    gen = torch.Generator().manual_seed(seed)
    case = {"image": torch.rand(3, 8, 8, generator=gen), "alpha": torch.rand(8, 8, generator=gen),
            "n_contrib": torch.randint(0, 9, (8, 8), generator=gen), "radii": torch.randint(0, 5, (10,), generator=gen),
            "grad_means": torch.randn(10, 3, generator=gen), "grad_sh": torch.randn(10, 16, 3, generator=gen)}
    return {"a/vanilla/aabb/exact": case, "timing": {"tc_gs_accutile_fwd_bwd_ms": 1.0}}


def test_compare_passes_atomics_order_and_fails_real_changes(capsys):
    before = run()
    assert du.compare(before, run()) == 0
    after = run()
    after["a/vanilla/aabb/exact"]["grad_means"] = after["a/vanilla/aabb/exact"]["grad_means"] * (1 + 1e-7)
    assert du.compare(before, after) == 0
    after["a/vanilla/aabb/exact"]["grad_sh"] = after["a/vanilla/aabb/exact"]["grad_sh"] * (1 + 1e-3)
    assert du.compare(before, after) == 1
    after = run()
    after["a/vanilla/aabb/exact"]["image"][0, 0, 0] += 2 ** -20
    assert du.compare(before, after) == 1
    assert "DIFFERS" in capsys.readouterr().out
    assert du.compare(before, {"timing": {}}) == 1  # a case missing after the change


def scaled(result, factor):
    out = {k: dict(v) for k, v in result.items()}
    out["a/vanilla/aabb/exact"]["grad_sh"] = out["a/vanilla/aabb/exact"]["grad_sh"] * factor
    return out


def test_a_second_round_shows_the_run_to_run_difference_and_keeps_the_bound(capsys):
    # a trained scene's gradients move by ~1e-4 between runs of the same kernels (lego, H100)
    before, again = run(), scaled(run(), 1 + 1e-4)
    assert du.compare(before, scaled(run(), 1 + 1.5e-4), again, scaled(run(), 1 - 1e-4)) == 1  # still 1e-5
    assert "1 beyond the bound, 1 of them within 2 x run to run" in capsys.readouterr().out
    assert du.compare(before, scaled(run(), 1 + 3e-4), again, scaled(run(), 1 + 3e-4)) == 1  # 3e-4 > 2 x 1e-4
    assert "1 beyond the bound, 0 of them within 2 x run to run" in capsys.readouterr().out
    assert du.compare(before, scaled(run(), 1 + 1e-7), again, scaled(run(), 1 + 1e-4)) == 0
    changed = run()
    changed["a/vanilla/aabb/exact"]["alpha"][0, 0] += 2 ** -20  # the second round's forward differs
    assert du.compare(before, run(), again, changed) == 1
    assert "DIFFERS" in capsys.readouterr().out


def test_three_rounds_take_the_run_to_run_difference_over_every_pair(capsys):
    # rounds 1 and 3 of "before" differ by 2e-4 (rounds 1-2 and 2-3 by 1e-4): the spread is 2e-4
    b = [run(), scaled(run(), 1 + 1e-4), scaled(run(), 1 + 2e-4)]
    a = [scaled(run(), 1 + 3e-4), scaled(run(), 1 + 1e-4), scaled(run(), 1 + 2e-4)]
    assert du.compare(b[0], a[0], b[1], a[1], b[2], a[2]) == 1
    out = capsys.readouterr().out
    assert "3 round(s), 1 beyond the bound, 1 of them within 2 x run to run" in out and "2.00e-04" in out
    assert du.compare(b[0], run(), b[1], b[1], b[2], b[2]) == 0
    try:
        du.compare(b[0], a[0], b[1])
    except ValueError as err:
        assert "one pair per round" in str(err)
    else:
        raise AssertionError("an odd number of sides was accepted")


def test_scenes_are_the_same_in_every_process():
    (n1, g1, c1), (n2, g2, _) = du.scenes(None)
    again = du.scenes(None)[0][1]
    assert torch.equal(g1.means, again.means) and torch.equal(g1.sh, again.sh)
    assert len(g1.means) == 2000 and len(g2.means) == 20000 and c1.width == 320


def test_table_reads_a_session_folder(tmp_path):
    run = tmp_path / "runs" / "tc_gs_aa"
    run.mkdir(parents=True)
    (tmp_path / "runs" / "vanilla_base").mkdir()
    (run / "summary.json").write_text(json.dumps({"psnr": 33.1, "ssim": 0.97, "lpips": 0.02, "num_gaussians": 123456,
                                                  "train_seconds": 50.2, "render_ms": 1.2}))
    (tmp_path / "eval" / "tc_gs_aa_ds4").mkdir(parents=True)
    (tmp_path / "eval" / "tc_gs_aa_ds4" / "metrics.json").write_text(json.dumps({"mean": {"psnr": 30.5}}))
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "tc_gs_aa.json").write_text(json.dumps({"rasterizers": [{"name": "v"}, {"name": "t", "psnr": 64.2}]}))
    lines = modes_table.table(tmp_path).splitlines()
    assert lines[2] == "| tc_gs_aa | 33.10 | 0.9700 | 0.0200 | 30.50 | – | 123,456 | 50.2 | 1.20 | 64.2 |"
    assert lines[3] == "| vanilla_base |" + " – |" * 9
