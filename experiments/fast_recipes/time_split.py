"""Where a run's training time goes, from its metrics.jsonl (`train/elapsed_s`, the training
clock at each log step): per tenth of the steps, the seconds, ms a step and the Gaussians at its
end, and from its timed steps the GPU's phases (summed) and the host's time to issue a step: where
the host's nears the step's ms, the step is bound by its launches, not by its pixels or Gaussians.
A recipe whose train_seconds exceed steps x its median phase times (lego_turbo's by ~4 s) shows
here whether the excess sits in the refine window, at a resolution change or at full size.

    python experiments/fast_recipes/time_split.py <run dir or metrics.jsonl> [...]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real_captures"))
from features_table import read_jsonl  # noqa: E402  (metrics.jsonl or its .gz)


def rows(path: Path, parts: int = 10) -> list[dict]:
    """One row per tenth of the logged steps: first and last step, seconds, ms a step, Gaussians."""
    path = path / "metrics.jsonl" if path.is_dir() else path
    try:
        logged = [r for r in read_jsonl(path) if "train/elapsed_s" in r]
    except FileNotFoundError as err:
        raise SystemExit(f"{err}; give a run folder (with metrics.jsonl) or the file") from None
    except ValueError:  # e.g. a run's summary.json (one JSON over many lines), not JSON Lines
        raise SystemExit(f"{path}: not a metrics.jsonl (a JSON object a line); give the run folder "
                         "that holds it, or the file itself") from None
    if len(logged) < 2:
        raise SystemExit(f"{path}: fewer than two log steps with train/elapsed_s (written since 2026-12-06)")
    last = logged[-1]["step"]
    out, start = [], logged[0]
    for i in range(1, parts + 1):
        bound = last * i // parts
        end = max((r for r in logged if r["step"] <= bound), key=lambda r: r["step"])
        if end["step"] <= start["step"]:
            continue
        seconds = end["train/elapsed_s"] - start["train/elapsed_s"]
        span = [r for r in logged if start["step"] < r["step"] <= end["step"]]
        gpu = [sum(v for k, v in r.items() if k.startswith("train/phase_ms/")) for r in span
               if any(k.startswith("train/phase_ms/") for k in r)]
        host = [r["train/host_ms"] for r in span if "train/host_ms" in r]  # written since 2026-12-06c
        out.append({"steps": f"{start['step']}-{end['step']}", "seconds": seconds,
                    "ms_per_step": 1000 * seconds / (end["step"] - start["step"]),
                    "gpu_ms": sum(gpu) / len(gpu) if gpu else None, "host_ms": sum(host) / len(host) if host else None,
                    "gaussians": end["train/num_gaussians"]})
        start = end
    return out


def table(path: Path) -> str:
    def ms(v):
        return "–" if v is None else f"{v:.3f}"

    lines = [f"{path}", "| steps | s | ms / step | GPU phases ms | host ms | Gaussians at the end |",
             "|---|---:|---:|---:|---:|---:|"]
    split = rows(path)
    lines += [f"| {r['steps']} | {r['seconds']:.2f} | {r['ms_per_step']:.3f} | {ms(r['gpu_ms'])} | {ms(r['host_ms'])} "
              f"| {r['gaussians']:,} |" for r in split]
    lines.append(f"| all | {sum(r['seconds'] for r in split):.2f} | | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    print("\n\n".join(table(Path(p)) for p in sys.argv[1:]))
