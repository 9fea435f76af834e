"""The dashboard read as a researcher reads it: labels that do not collide, axes that do not
mislead, titles that say what was averaged, render-time error bars, the context of every plot,
a legend clear of the bars, and an index.html with results.md's tables and links to the runs."""
import json
from pathlib import Path

import matplotlib
import pytest
import yaml

from gsexp import dashboard
from gsexp.sweep.labels import place_labels
from gsexp.sweep.results import collect

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def job(root: Path, i: int, overrides: list[str], summary: dict, device="cpu", renders=False):
    folder = root / f"{i}_{','.join(overrides)}"
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump({
        "data": {"kind": "blender", "path": "/data/nerf_synthetic/lego", "downscale": 8}, "iterations": 300,
        "device": device, "rasterizer": {"_target_": "gsexp.render.settings.TorchSettings"}}))
    per_view = [{"view": str(v), "render_ms": summary["render_ms"] * (0.8 + 0.1 * v)} for v in range(5)]
    (folder / "summary.json").write_text(json.dumps({"status": "ok", "iterations": 300, "overrides": overrides,
                                                     "per_view": per_view, **summary}))
    if renders:
        from PIL import Image
        (folder / "renders").mkdir()
        Image.new("RGB", (24, 8)).save(folder / "renders" / "test_000_compare.png")
    return folder


def sweep(root: Path, seeds=1) -> Path:
    """Two fp32 variants that land on the same point (their labels used to merge), and a third."""
    same = {"psnr": 30.0, "ssim": 0.95, "lpips": 0.1, "render_ms": 10.0, "stage_ms": {"blend": 8.0, "sort": 2.0}}
    i = 0
    for seed in range(seeds):
        for blend, summary in (("gemm", same), ("tcgs", same),
                               ("vanilla", {**same, "psnr": 30.005, "render_ms": 10.05})):
            job(root, i, [f"rasterizer.blend={blend}", f"seed={seed}"],
                {**summary, "psnr": summary["psnr"] + 0.01 * seed, "train_seconds": 100.0 + 5 * seed + i},
                renders=(i == 0))
            i += 1
    return root


@pytest.fixture
def figures(monkeypatch):
    """The figures the dashboard draws, kept open for inspection."""
    kept, close = [], plt.close
    monkeypatch.setattr(dashboard.plt, "close", lambda fig: kept.append(fig))
    yield kept
    for fig in kept:
        close(fig)


def boxes_of(fig, axes):
    renderer = fig.canvas.get_renderer()  # the text alone, not its leader line
    return [matplotlib.text.Text.get_window_extent(t, renderer) for t in axes.texts]


def test_labels_of_coinciding_and_close_points_do_not_overlap():
    fig, ax = plt.subplots(figsize=(5, 4))
    points = [(10.0, 30.0, "blend=gemm precision=fp32", "1"), (10.0, 30.0, "blend=tcgs precision=fp32", "2"),
              (10.1, 30.02, "blend=vanilla", "3"), (10.2, 30.0, "blend=tcgs precision=fp16", "4"),
              (12.0, 29.0, "far", "5")]
    ax.scatter([p[0] for p in points], [p[1] for p in points])
    fig.canvas.draw()
    assert place_labels(ax, points) == []  # room for every label: no numbered key
    assert len(ax.texts) == 4  # the two coinciding points share one label
    merged = [t.get_text() for t in ax.texts if "gemm" in t.get_text()]
    assert merged == ["blend=gemm precision=fp32\nblend=tcgs precision=fp32"]
    assert_readable(fig, ax)
    plt.close(fig)


def assert_readable(fig, ax):
    """No two labels overlap, and each stays inside the axes."""
    fig.canvas.draw()
    boxes, frame = boxes_of(fig, ax), ax.get_window_extent()
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)


def test_crowded_labels_become_numbers_with_a_key():
    """Twenty long labels on a small plot: those without room become numbers, none overlap."""
    fig, ax = plt.subplots(figsize=(4, 3))
    points = [(10 + 0.05 * (i % 5), 30 + 0.01 * (i // 5), f"blend=tcgs precision=fp16 g2l=False variant {i}",
               str(i + 1)) for i in range(20)]
    ax.scatter([p[0] for p in points], [p[1] for p in points])
    fig.canvas.draw()
    keyed = place_labels(ax, points)
    assert keyed and set(keyed) <= {p[3] for p in points}
    assert_readable(fig, ax)
    plt.close(fig)


def test_plots_state_context_seeds_and_error_bars(tmp_path, figures):
    rows = collect(sweep(tmp_path / "one"))
    assert rows[0]["scene"] == "lego (blender, downscale 8)" and rows[0]["backend"] == "torch"
    assert rows[0]["render_ms_p25"] < rows[0]["render_ms"] < rows[0]["render_ms_p75"]
    dashboard.build(rows, tmp_path / "out1", "t")
    quality, train_time, stages, seeds = figures
    for fig in figures:  # every plot: scene, iterations, device, backend
        title = fig._suptitle.get_text()
        assert "lego (blender, downscale 8)" in title and "300 iterations" in title and "device cpu" in title
        assert "torch reference" in title and "CPU timings of the reference" in title
        assert "mean ± std" not in title  # one seed per variant
    speed_ax = quality.axes[0]
    assert any(c.has_xerr for c in speed_ax.containers)  # render time: the test views' quartiles
    assert "training time" in train_time.axes[0].get_xlabel() and "Quality vs training time" in train_time._suptitle.get_text()
    assert len(train_time.axes[0].containers) == 3  # every variant, at its training time
    assert not any(c.has_xerr for c in train_time.axes[0].containers)  # one run: no spread of its time
    for ax in seeds.axes:  # dots, no bars: no baseline to mislead; every axis says it is not from 0
        assert not ax.patches and "not from 0" in ax.get_xlabel()
    ax = stages.axes[0]
    legend = ax.get_legend().get_window_extent(stages.canvas.get_renderer())
    assert legend.y1 < ax.get_window_extent().y0  # under the axes: it covers no bar


def test_titles_say_mean_and_std_over_n_seeds_only_for_n_over_1(tmp_path, figures):
    dashboard.build(collect(sweep(tmp_path / "three", seeds=3)), tmp_path / "out3", "t")
    quality, train_time, _, seeds = figures
    assert "mean ± std over 3 seeds" in seeds._suptitle.get_text()
    assert any(c.has_xerr for c in train_time.axes[0].containers)  # training time: ± std over the seeds
    assert "mean ± std over 3 seeds" in quality._suptitle.get_text()
    assert any(c.has_xerr for c in seeds.axes[0].containers)


def test_index_links_runs_renders_and_carries_the_seed_table(tmp_path):
    root = sweep(tmp_path / "sweep", seeds=2)
    page = dashboard.main([str(root)]).read_text()
    assert "Over seeds (mean ± std)" in page and "± " in page
    assert 'href="../0_rasterizer.blend=gemm,seed=0/"' in page
    assert 'src="../0_rasterizer.blend=gemm,seed=0/renders/test_000_compare.png"' in page
    assert "scene lego (blender, downscale 8) · 300 iterations · device cpu" in page
    given = dashboard.main([str(root), "--out", str(tmp_path / "o"), "--device", "cuda (H200)"]).read_text()
    assert "device cuda (H200)" in given
