"""The real-capture table from session_real.sh's folder (peers.tgz's real/): per scene, each
trainer's runs (one per seed) with training time, Gaussians and score.py's scores, then each
trainer's mean over the seeds and the ratio of mean times.

    python experiments/peers/real_table.py <unpacked peers/real>

gsexp's time and count come from its run's summary.json (rc/runs/<scene>_tcgs_accutile[_s<seed>],
or study/ as committed in experiments/peers/<session>/), gsplat's from its harness JSON
(rc/peer/gsplat_<scene>[_s<seed>].json, or runs/); the scores from
scores/<gsexp|main>_<scene>[_s<seed>].json, the same 8-bit scoring for both. With two seeds or
more, each trainer's per-view spread: per test view the PSNR range over its seeds."""
from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

NAME = re.compile(r"^(?P<who>gsexp|main)_(?P<scene>.+?)(?:_s(?P<seed>\d+))?$")


def record(root: Path, who: str, scene: str, seed: int) -> dict | None:
    tail = "" if seed == 0 else f"_s{seed}"
    for runs, peer in (("rc/runs", "rc/peer"), ("study", "runs")):  # as unpacked, as committed
        path = (root / runs / f"{scene}_tcgs_accutile{tail}" / "summary.json" if who == "gsexp"
                else root / peer / f"gsplat_{scene}{tail}.json")
        if path.is_file():
            return json.loads(path.read_text())
    return None


def rows(root: Path) -> list[dict]:
    out = []
    for file in sorted((root / "scores").glob("*.json")):
        m = NAME.match(file.stem)
        if m is None:
            continue
        who, scene, seed = m["who"], m["scene"], int(m["seed"] or 0)
        run = record(root, who, scene, seed) or {}
        scored = json.loads(file.read_text())
        out.append({"scene": scene, "who": who, "seed": seed, "views": scored["views"], **scored["mean"],
                    "per_view": {v["view"]: v["psnr"] for v in scored.get("per_view", [])},
                    "train_s": run.get("train_seconds"), "gaussians": run.get("num_gaussians")})
    return sorted(out, key=lambda r: (r["scene"], r["who"], r["seed"]))


def view_spread(runs: list[dict]) -> str:
    """', view spread mean M max X dB' over the views every seed scored, or '' for one seed."""
    views = set.intersection(*(set(r["per_view"]) for r in runs)) if len(runs) > 1 else set()
    if not views:
        return ""
    spread = [max(r["per_view"][v] for r in runs) - min(r["per_view"][v] for r in runs) for v in sorted(views)]
    return f", view spread mean {statistics.fmean(spread):.2f} max {max(spread):.2f} dB"


def fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown(table: list[dict]) -> str:
    lines = ["| scene | trainer | seed | train s | Gaussians | PSNR | SSIM | LPIPS-Alex |", "|---|---|---|---|---|---|---|---|"]
    means = {}
    for r in table:
        lines.append(f"| {r['scene']} ({r['views']}) | {r['who']} | {r['seed']} | {fmt(r['train_s'], '.1f')} | "
                     f"{fmt(r['gaussians'], ',')} | {r['psnr']:.2f} | {r['ssim']:.4f} | {fmt(r.get('lpips_alex'), '.4f')} |")
        means.setdefault((r["scene"], r["who"]), []).append(r)
    lines.append("")
    for scene in sorted({s for s, _ in means}):
        summary = {}
        for who in ("gsexp", "main"):
            runs = means.get((scene, who), [])
            times = [r["train_s"] for r in runs if r["train_s"] is not None]
            if runs:
                summary[who] = (statistics.fmean(r["psnr"] for r in runs), statistics.fmean(times) if times else None)
                lines.append(f"{scene} {who}: {len(runs)} seed(s), mean PSNR {summary[who][0]:.2f} dB, "
                             f"mean train {fmt(summary[who][1], '.1f')} s" + view_spread(runs))
        if len(summary) == 2 and summary["gsexp"][1] and summary["main"][1]:
            lines.append(f"{scene}: gsexp {summary['main'][1] / summary['gsexp'][1]:.2f}x gsplat main, "
                         f"{summary['gsexp'][0] - summary['main'][0]:+.2f} dB")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        raise SystemExit(2)
    if not (Path(sys.argv[1]) / "scores").is_dir():
        print(f"real_table.py: {sys.argv[1]} has no scores/ folder; give the unpacked peers/real folder that "
              "session_real.sh writes", file=sys.stderr)
        raise SystemExit(2)
    print(markdown(rows(Path(sys.argv[1]))))
