"""Tables and plots of the scaling study from its JSON files (see README.md).

    python experiments/scale/summarize.py <study dir> [--out experiments/scale]

Reads <study dir>/render/*.json (python -m gsexp.bench, one per model and resolution) and
<study dir>/train/*.json (train_step.py, one per trainer, size and round) and, where present,
<study dir>/profile/*.json (train_step.py --profile); writes results.md,
cost_per_pair.png and cost_per_gaussian.png to --out and prints results.md."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PEER_PREFIX = "gsplat"
OURS = "tc_gs:intersect=accutile"


def load(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def render_rows(reports: list[dict]) -> dict:
    """{resolution: {num_gaussians: {rasterizer name: row}}}"""
    out = defaultdict(dict)
    for rep in reports:
        c = rep["config"]
        out[c["resolution"]][c["num_gaussians"]] = {r["name"]: r for r in rep["rasterizers"]}
    return out


def peer_of(rows: dict):
    return next((r for name, r in rows.items() if name.startswith(PEER_PREFIX)), None)


def render_table(res: str, by_size: dict) -> list[str]:
    names = [n for n in next(iter(by_size.values())) if not n.startswith(PEER_PREFIX)]
    lines = [f"### Render at {res}: end-to-end median ms (pairs, frame memory MiB)", "",
             "| Gaussians | " + " | ".join(names) + " | gsplat | ours ÷ gsplat |",
             "|---:|" + "---:|" * (len(names) + 2)]
    for n, rows in sorted(by_size.items()):
        peer = peer_of(rows)
        cells = []
        for name in names:
            r = rows.get(name)
            mem = "" if r is None or r.get("frame_mem_mib") is None else f", {r['frame_mem_mib']:,.0f}"
            pairs = "" if r is None or r.get("pairs") is None else f" ({r['pairs'] / 1e6:.1f}M{mem})"
            cells.append("-" if r is None else f"{r['e2e']['median']:.3f}{pairs}")
        ours = rows.get(OURS)
        ratio = f"{peer['e2e']['median'] / ours['e2e']['median']:.2f}×" if peer and ours else "-"
        cells += ["-" if peer is None else f"{peer['e2e']['median']:.3f}", ratio]
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    return lines + [""]


def stage_table(res: str, by_size: dict) -> list[str]:
    ours = {n: rows[OURS] for n, rows in by_size.items() if OURS in rows}
    if not ours:
        return []
    stages = sorted({s for r in ours.values() for s in r["stages"]})
    lines = [f"### {OURS} per stage at {res}: median ms", "",
             "| Gaussians | " + " | ".join(stages) + " | ns per pair (e2e) | ns per Gaussian (preprocess) |",
             "|---:|" + "---:|" * (len(stages) + 2)]
    for n, r in sorted(ours.items()):
        per_pair = f"{r['e2e']['median'] / r['pairs'] * 1e6:.3f}" if r.get("pairs") else "-"
        pre = r["stages"].get("preprocess")
        per_g = f"{pre['median'] / n * 1e6:.3f}" if pre else "-"
        lines.append(f"| {n:,} | " + " | ".join(f"{r['stages'][s]['median']:.3f}" if s in r["stages"] else "-"
                                                for s in stages) + f" | {per_pair} | {per_g} |")
    return lines + [""]


def train_table(results: list[dict]) -> list[str]:
    by = defaultdict(list)
    for r in results:
        by[(r["num_gaussians"], r["trainer"])].append(r)
    sizes = sorted({n for n, _ in by})
    if not sizes:
        return []
    lines = ["### Training step at a fixed model (lego views, step 20,000 of 30,000)", "",
             "| Gaussians | gsexp ms | gsplat ms | gsplat ÷ gsexp | gsexp peak GiB | gsplat peak GiB | rounds "
             "| gsexp pair overflows |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def med(n, t, key):
        vals = [r[key] for r in by.get((n, t), []) if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    for n in sizes:
        ours, peer = med(n, "gsexp", "step_ms_median"), med(n, "gsplat", "step_ms_median")
        ratio = f"{peer / ours:.2f}×" if ours and peer else "-"
        fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        lines.append(f"| {n:,} | {fmt(ours, '.2f')} | {fmt(peer, '.2f')} | {ratio} | "
                     f"{fmt(med(n, 'gsexp', 'peak_mem_gib'), '.2f')} | {fmt(med(n, 'gsplat', 'peak_mem_gib'), '.2f')} | "
                     f"{max(len(by.get((n, 'gsexp'), [])), len(by.get((n, 'gsplat'), [])))} | "
                     f"{sum(r.get('pair_overflows', 0) for r in by.get((n, 'gsexp'), []))} |")
    # a render past its pair capacity dropped pairs: that step did less than the real one
    return lines + ["", "Pair overflows above 0 mean some timed gsexp steps dropped pairs: those rows "
                    "understate the step.", ""]


def short(kernel: str) -> str:
    """A kernel's name without its return type, anonymous namespace, template arguments and signature."""
    kernel = kernel.removeprefix("void ").replace("(anonymous namespace)::", "")
    for sep in ("<", "("):
        kernel = kernel.split(sep)[0]
    return kernel.strip() or "?"


def profile_table(results: list[dict], top: int = 10) -> list[str]:
    """Per size, the two trainers' costliest kernels side by side (train_step.py --profile)."""
    by = {(r["num_gaussians"], r["trainer"]): r for r in results if r.get("profile")}
    lines = []
    for n in sorted({n for n, _ in by}):
        ours, peer = by.get((n, "gsexp")), by.get((n, "gsplat"))
        head = [f"### Where a training step goes at {n:,} Gaussians (torch.profiler, ms per step)", ""]
        for name, r in (("gsexp", ours), ("gsplat", peer)):
            if r:
                head.append(f"- {name}: {r['profile']['total_ms_per_step']:.2f} ms of {r['profile']['kind']} per step "
                            f"({r['profile']['steps']} steps)" + (", phases " + ", ".join(
                                f"{k} {v:.2f}" for k, v in r["phase_ms"].items()) if r.get("phase_ms") else ""))
        rows = [(r and r["profile"]["top"]) or [] for r in (ours, peer)]
        lines += head + ["", "| # | gsexp | ms | gsplat | ms |", "|---:|---|---:|---|---:|"]
        for i in range(min(top, max(map(len, rows)))):
            cells = [f"{short(t[i]['name'])} | {t[i]['ms_per_step']:.3f}" if i < len(t) else "- | -" for t in rows]
            lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def plot(by_res: dict, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for fname, ylabel, value in (
            ("cost_per_pair.png", "end-to-end ns per pair", lambda r, n: r["e2e"]["median"] / r["pairs"] * 1e6
             if r.get("pairs") else None),
            ("cost_per_gaussian.png", "end-to-end ns per Gaussian", lambda r, n: r["e2e"]["median"] / n * 1e6)):
        fig, axes = plt.subplots(1, len(by_res), figsize=(6 * len(by_res), 4), squeeze=False)
        for ax, (res, by_size) in zip(axes[0], sorted(by_res.items())):
            names = dict.fromkeys(name for rows in by_size.values() for name in rows)
            for name in names:
                pts = [(n, value(rows[name], n)) for n, rows in sorted(by_size.items()) if name in rows]
                pts = [(n, v) for n, v in pts if v is not None]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=name)
            ax.set(xscale="log", xlabel="Gaussians (SH degree 3)", ylabel=ylabel, title=f"lego grown, {res}")
            sizes = sorted(by_size)  # the study's sizes as ticks; log-scale minor labels collide
            ax.set_xticks(sizes, [f"{n / 1e6:g} M" for n in sizes])
            ax.minorticks_off()
            ax.set_ylim(bottom=0)  # from zero, so "flat" reads as flat
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        written.append(fname)
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", type=Path)
    p.add_argument("--out", type=Path, default=Path(__file__).parent)
    a = p.parse_args(argv)
    renders, trains = load(a.study / "render"), load(a.study / "train")
    if not renders and not trains:
        p.error(f"{a.study}: no render/*.json or train/*.json to summarise")
    by_res = render_rows(renders)
    lines = ["# Scaling study: figures (written by summarize.py)", ""]
    devices = sorted({r["config"]["device_name"] for r in renders} | {t["device"] for t in trains})
    lines += [f"Device: {', '.join(devices)}. Source: {a.study}.", ""]
    for res, by_size in sorted(by_res.items()):
        lines += render_table(res, by_size) + stage_table(res, by_size)
    lines += train_table(trains) + profile_table(load(a.study / "profile"))
    a.out.mkdir(parents=True, exist_ok=True)
    if by_res:
        lines += ["Plots: " + ", ".join(plot(by_res, a.out)), ""]
    text = "\n".join(lines)
    (a.out / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
