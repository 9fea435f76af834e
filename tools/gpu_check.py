"""One call on a GPU machine: build csrc, run the GPU tests, bench biker, print a summary.

    python tools/gpu_check.py --out results/ [--shared DIR] [--sizes 1920x1080,3840x2160]
        [--rasterizers vanilla,gemm_gs,tc_gs] [--frames 20] [--warmup 20] [--rounds 5]
        [--tests "tests/test_cuda_build.py ..." | --tests ""] [--no-gsplat]

Writes build.txt, pytest.log and bench_<W>x<H>.json into --out. Exits with pytest's status.
A repository tool, not part of the gsexp package: it runs the checkout it sits in."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's gsexp, whatever is installed

TESTS = ("tests/test_cuda_build.py tests/test_cuda_rasterizer.py tests/test_cuda_matrix_blends.py "
         "tests/test_cuda_intersect.py")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python tools/gpu_check.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--shared", type=Path, default=Path(os.environ.get("GSEXP_SHARED", REPO.parent / "shared")),
                   help="shared data folder (default $GSEXP_SHARED, else ../shared)")
    p.add_argument("--ply", type=Path, help="scene to bench (default <shared>/data/scenes/biker.compressed.ply)")
    p.add_argument("--sizes", default="1920x1080,3840x2160", help="orbit resolutions, WxH comma list")
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--warmup", type=int, default=20, help="untimed frames per camera and round")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (python -m gsexp.bench --rounds)")
    p.add_argument("--tests", default=TESTS, help='pytest paths; "" skips the tests')
    p.add_argument("--rasterizers", default="vanilla,gemm_gs,tc_gs",
                   help="bench specs (python -m gsexp.bench --rasterizers)")
    p.add_argument("--no-gsplat", action="store_true", help="bench without the gsplat peer")
    args = p.parse_args(argv)
    try:
        args.sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes: expected WxH[,WxH...], got {args.sizes!r}")
    return args


def build(out: Path) -> float:
    from gsexp.render.cuda import build

    start = time.perf_counter()
    build.load()
    seconds = time.perf_counter() - start
    (out / "build.txt").write_text(f"build (cached after the first): {seconds:.1f} s\n")
    return seconds


def run_tests(tests: list[str], shared: Path, log: Path) -> tuple[int, str]:
    if not tests:
        return 0, "skipped (--tests '')"
    with log.open("w") as f:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *tests],
                              cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                              env={**os.environ, "GSEXP_SHARED": str(shared)})
    lines = log.read_text().strip().splitlines()
    return done.returncode, f"{lines[-1] if lines else '(no output)'}  (log: {log})"


def bench(args) -> list:
    from gsexp.bench.cli import main as bench_main

    ply = args.ply or args.shared / "data/scenes/biker.compressed.ply"
    reports = []
    for w, h in args.sizes:
        argv = ["--ply", str(ply), "--rasterizers", args.rasterizers, "--width", str(w), "--height", str(h),
                "--frames", str(args.frames), "--warmup", str(args.warmup), "--rounds", str(args.rounds),
                "--json", str(args.out / f"bench_{w}x{h}.json"), *(["--no-gsplat"] if args.no_gsplat else [])]
        reports.append((f"{w}x{h}", bench_main(argv)))
    return reports


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    build_s = build(args.out)
    status, tests_line = run_tests(args.tests.split(), args.shared, args.out / "pytest.log")
    reports = bench(args)
    print(f"\nbuild (cached after the first): {build_s:.1f} s")
    print(f"GPU tests: {tests_line}")
    for size, report in reports:
        for r in report["rasterizers"]:
            stages = " ".join(f"{k} {v['median']:.3f}" for k, v in r.get("stages", {}).items())
            print(f"{size:>10} {r['name']:<28} e2e {r['e2e']['median']:.3f} ms  {stages}")
    return status


if __name__ == "__main__":
    sys.exit(main())
