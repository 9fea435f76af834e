"""tests/test_peer_harness.py against gsplat main's pure-Python parts on a machine without CUDA.

gsplat main's package __init__ builds its CUDA extension on import, so this imports its strategy,
losses and scene modules from a source tree without running that __init__ (rasterization and the
CUDA helpers the strategy imports stay stubs: the test's stand-in rasterizes, and
DefaultStrategy never calls them).

    git -C <gsplat mirror> archive 90d7b4b3 gsplat | tar -x -C /tmp/gsplat_main
    python experiments/peers/check_main_on_cpu.py /tmp/gsplat_main
"""
import sys
import types
from pathlib import Path

import pytest

source = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gsplat_main") / "gsplat"
if not (source / "losses.py").is_file():
    print(f"check_main_on_cpu.py: {source} is not gsplat main's source (no losses.py); see the usage above",
          file=sys.stderr)
    sys.exit(2)
package = types.ModuleType("gsplat")
package.__path__ = [str(source)]
exec((source / "version.py").read_text(), package.__dict__)
package.quat_scale_to_covar_preci = None  # imported by strategy/ops.py for MCMC only
package.rasterization = lambda **kwargs: None
sys.modules["gsplat"] = package
sys.modules["gsplat.relocation"] = types.SimpleNamespace(compute_relocation=None)  # MCMC only; imports CUDA
import gsplat.losses, gsplat.scene, gsplat.strategy  # noqa: E401,E402  (from the source tree)

package.losses, package.scene, package.strategy = gsplat.losses, gsplat.scene, gsplat.strategy
print(f"gsplat {package.__version__} from {source}")
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", str(Path(__file__).resolve().parents[2] / "tests/test_peer_harness.py")]))
