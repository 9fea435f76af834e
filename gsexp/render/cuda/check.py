"""One call on a GPU machine: build csrc, run the GPU tests, bench biker, print a table.

    python -m gsexp.render.cuda.check [--out DIR] [--shared DIR] [--frames 20] [--warmup 20] [--rounds 5]

Writes pytest.log and bench_<W>x<H>.json into --out (default: the current directory)."""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SIZES = ((1920, 1080), (3840, 2160))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gsexp.render.cuda.check")
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared", help="shared data folder")
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--warmup", type=int, default=20, help="untimed frames per camera and round")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the bench (python -m gsexp.bench --rounds)")
    p.add_argument("--tests", default="tests/test_cuda_build.py tests/test_cuda_rasterizer.py "
                                      "tests/test_cuda_matrix_blends.py tests/test_cuda_intersect.py")
    p.add_argument("--rasterizers", default="cuda,cuda:gemm:precision=fp16,cuda:tcgs:precision=fp16",
                   help="bench specs (python -m gsexp.bench --rasterizers)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    from gsexp.render.cuda import build

    start = time.perf_counter()
    build.load()
    build_s = time.perf_counter() - start

    log = args.out / "pytest.log"
    with log.open("w") as f:
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                                *args.tests.split()], cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                               env={**__import__("os").environ, "GSEXP_SHARED": str(args.shared)})
    tests_line = log.read_text().strip().splitlines()[-1]

    from gsexp import bench

    rows = []
    for w, h in SIZES:
        report = bench.main(["--ply", str(args.shared / "data/scenes/biker.compressed.ply"), "--rasterizers", args.rasterizers,
                             "--width", str(w), "--height", str(h), "--frames", str(args.frames),
                             "--warmup", str(args.warmup), "--rounds", str(args.rounds),
                             "--json", str(args.out / f"bench_{w}x{h}.json")])
        rows.append((f"{w}x{h}", report))

    print(f"\nbuild (cached after the first): {build_s:.1f} s")
    print(f"GPU tests: {tests_line}  (log: {log})")
    for size, report in rows:
        for r in report["rasterizers"]:
            stages = " ".join(f"{k} {v['median']:.3f}" for k, v in r.get("stages", {}).items())
            print(f"{size:>10} {r['name']:<14} e2e {r['e2e']['median']:.3f} ms  {stages}")
    return tests.returncode


if __name__ == "__main__":
    sys.exit(main())
