"""The code's shape: small functions and modules, layers that only point down, kernels that
read no environment (their switches come from the settings)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gsexp"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 400


def modules():
    return sorted(PACKAGE.rglob("*.py"))


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_functions_and_modules_are_short():
    long_functions, long_modules = [], []
    for path in modules():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines}")
    assert not long_functions, long_functions
    assert not long_modules, long_modules


@pytest.mark.parametrize("package,forbidden", [
    ("compress", "gsexp.train"),
    ("train/strategy", "gsexp.render.reference"),
    ("gaussians", "gsexp.train"),
    ("gaussians", "gsexp.render"),
    ("render", "gsexp.train"),
    ("render", "gsexp.compress"),
])
def test_layers_point_down(package, forbidden):
    bad = [f"{p.relative_to(ROOT)}: {m}" for p in sorted((PACKAGE / package).rglob("*.py"))
           for m in imports_of(p) if m == forbidden or m.startswith(forbidden + ".")]
    assert not bad, bad


def test_kernels_read_no_environment():
    bad = [p.name for p in (ROOT / "csrc").iterdir() if "getenv" in p.read_text()]
    assert not bad, bad


def test_gpu_tooling_lives_outside_the_package():
    assert not (PACKAGE / "render" / "cuda" / "parity.py").exists()
    assert not (PACKAGE / "render" / "cuda" / "check.py").exists()


def test_shell_scripts_parse():
    """The GPU sessions' scripts run only on a lent machine, where a syntax error costs its time:
    each must at least parse (bash -n)."""
    import subprocess
    scripts = sorted((ROOT / "experiments").rglob("*.sh")) + [ROOT / ".ci" / "run"]
    assert len(scripts) > 10, scripts
    bad = {str(s.relative_to(ROOT)): r.stderr.strip() for s in scripts
           if (r := subprocess.run(["bash", "-n", str(s)], capture_output=True, text=True)).returncode}
    assert not bad, bad


def test_committed_studies_keep_their_metrics_gzipped():
    """The checkout travels to the GPU machine with each call's staged data under 64 MiB, and a
    30K-step metrics.jsonl is ~160 KiB (~20 gzipped): the studies' readers take <file>.gz
    (gzip -9 -n the files copied back from a session before committing them)."""
    plain = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "experiments").rglob("*.jsonl"))
    assert not plain, plain
