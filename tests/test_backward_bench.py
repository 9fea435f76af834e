"""experiments/tensor_core_backward/bench.py's modes on the CPU: probes (MODE@PROBE) parse,
are left out of the gradient checks, and a wrong one is one clear line."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments/tensor_core_backward/bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("backward_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_probe_modes_parse_and_skip_the_error_check(bench):
    a = bench.parse_args(["--modes", "exact,gemm_tf32,exact@walk,gemm_tf32@no_atomics"])
    assert a.modes == ["exact", "gemm_tf32", "exact@walk", "gemm_tf32@no_atomics"]
    assert bench.checked(a.modes) == ["gemm_tf32"]
    assert bench.split_mode("gemm_fp32@walk") == ("gemm_fp32", "walk")
    assert bench.split_mode("exact") == ("exact", "")


@pytest.mark.parametrize("modes, message", [
    ("exact,gemm_tf32@fast", "'gemm_tf32@fast': a probe must be one of walk, no_atomics"),
    ("exact,gemm_fp16@walk", "rasterizer.backward"),
    ("gemm_tf32,exact", "the first must be exact"),
])
def test_bad_modes_are_one_line(bench, capsys, modes, message):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--modes", modes])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
