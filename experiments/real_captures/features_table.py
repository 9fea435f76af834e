"""Issue 41's study table from collected run summaries (run.sh collect: <dir>/<run>/summary.json):

    python experiments/real_captures/features_table.py <dir> [<dir> ...]

Runs are named <data>_<raster>[_<feature>][_s<seed>] (run.sh). One row per data x raster x
feature: the mean over its seeds of PSNR, cc_psnr, SSIM, LPIPS, Gaussians and training time, and
the per-view seed spread: per test view the PSNR range over the seeds, averaged over the views
(and its largest view), the figure the issue asks before and after; and where a run's
metrics.jsonl lies beside its summary, the peak of its periodic test PSNR and the step it fell on
(beer's and fern's test PSNR peak at 1-3K steps and fall after: the runs over-train).
"""
from __future__ import annotations

import gzip
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

# longest first where one name starts another (turbo15k_app before turbo15k before turbo)
FEATURES = ("app", "pose", "both", "grid", "gridpose", "turbo15k_app", "turbo15k_grid", "turbo15k_ns", "turbo12k_ns",
            "turbo15k", "turbo12k", "turbo", "short5k", "sh0", "sh1", "dens3k", "b100k",
            "fast10k_dens3k", "fast10k_d3k_nr_grid", "fast10k_d3k_nr", "fast10k", "fast8k_d3k_nr", "res", "budget",
            "batch2", "fast5k_d3k_nr_b2")
NAME = re.compile(rf"^(?P<base>.+?)(?:_(?P<feat>{'|'.join(FEATURES)}))?(?:_s(?P<seed>\d+))?$")


def runs(folders) -> dict:
    """(data_raster, feature) -> {seed: summary} for every finished run."""
    found = defaultdict(dict)
    for folder in folders:
        for path in sorted(Path(folder).glob("*/summary.json")):
            s = json.loads(path.read_text())
            if s.get("status") != "ok":
                continue
            m = NAME.match(path.parent.name)
            found[(m["base"], m["feat"] or "base")][int(m["seed"] or 0)] = {**s, "peak": peak(path.parent)}
    return found


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a metrics.jsonl, or of its gzipped copy <path>.gz (the committed studies keep
    theirs gzipped: the checkout travels to the GPU machine under a size limit); FileNotFoundError
    when neither exists. Stdlib only, so the studies' scripts start at once (time_split.py too)."""
    given = path
    if path.suffix != ".gz" and not path.is_file():
        path = path.with_name(path.name + ".gz")
    if not path.is_file():
        raise FileNotFoundError(f"{given}: no such file" + ("" if given == path else " (nor its .gz)"))
    text = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def curve(run: Path) -> list[tuple[int, float]]:
    """(step, test PSNR) of each periodic evaluation in the run's metrics.jsonl, in step order."""
    try:
        rows = read_jsonl(run / "metrics.jsonl")
    except FileNotFoundError:
        return []
    return sorted((row["step"], row["eval/psnr"]) for row in rows if "eval/psnr" in row)


def peak(run: Path):
    """(PSNR, step) of the run's best periodic test evaluation, or None."""
    return max(((psnr, step) for step, psnr in curve(run)), default=None)


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def spread(seeds: dict):
    """Per view the PSNR range over the seeds: (mean over views, largest), or (None, None)."""
    if len(seeds) < 2:
        return None, None
    per_view = defaultdict(list)
    for s in seeds.values():
        for v in s.get("per_view", []):
            per_view[v["view"]].append(v["psnr"])
    ranges = [max(p) - min(p) for p in per_view.values() if len(p) == len(seeds)]
    return (mean(ranges), max(ranges)) if ranges else (None, None)


def fmt(value, spec):
    return "–" if value is None else format(value, spec)


def table(folders) -> str:
    lines = ["| run | feature | seeds | PSNR | cc_psnr | SSIM | LPIPS | Gaussians | train s "
             "| view spread dB (mean, max) | peak test PSNR @ step |", "|" + "---|" * 11]
    order = {f: i for i, f in enumerate(("base",) + FEATURES)}
    for (base, feat), seeds in sorted(runs(folders).items(), key=lambda kv: (kv[0][0], order[kv[0][1]])):
        got = list(seeds.values())
        avg = {k: mean([s.get(k) for s in got]) for k in ("psnr", "cc_psnr", "ssim", "lpips", "num_gaussians",
                                                           "train_seconds")}
        mean_range, max_range = spread(seeds)
        peaks = [s["peak"] for s in got if s["peak"]]
        steps = "/".join(f"{p[1] // 1000}K" for p in peaks)
        top = f"{mean([p[0] for p in peaks]):.2f} @ {steps}" if peaks else "–"
        lines.append(f"| {base} | {feat} | {len(got)} | {fmt(avg['psnr'], '.2f')} | {fmt(avg['cc_psnr'], '.2f')} | "
                     f"{fmt(avg['ssim'], '.4f')} | {fmt(avg['lpips'], '.4f')} | {fmt(avg['num_gaussians'], ',.0f')} | "
                     f"{fmt(avg['train_seconds'], '.1f')} | {fmt(mean_range, '.2f')}, {fmt(max_range, '.2f')} | "
                     f"{top} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.split("\n\n")[1].strip())
    print(table(sys.argv[1:]))
