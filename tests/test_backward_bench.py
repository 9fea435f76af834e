"""experiments/tensor_core_backward/bench.py's modes on the CPU: probes (MODE@PROBE) parse,
are left out of the gradient checks, splits (exact@split1, @split2) stay in them, and a wrong
one is one clear line."""
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


def test_split_modes_parse_and_keep_the_error_check(bench):
    a = bench.parse_args(["--modes", "exact,exact@split1,exact@split2,exact@walk"])
    assert bench.checked(a.modes) == ["exact@split1", "exact@split2"]


@pytest.mark.parametrize("modes, message", [
    ("exact,gemm_tf32@fast", "'gemm_tf32@fast': after @ one of walk, no_atomics, split1, split2"),
    ("exact,gemm_tf32@split2", "only the exact backward splits its tiles"),
    ("exact,gemm_fp16@walk", "rasterizer.backward"),
    ("gemm_tf32,exact", "the first must be exact"),
])
def test_bad_modes_are_one_line(bench, capsys, modes, message):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--modes", modes])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
