"""Quick GPU check of the tensor-core blend backward: gradients of backward=gemm_fp32 and
gemm_tf32 against the exact kernel (max |g - g_exact| / max |g_exact| per tensor) on random
scenes, for vanilla and tc_gs. Prints GEMM_CHECK PASS or FAIL last.

    python tools/gemm_check.py          (from the repository root)
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from render_helpers import cuda_scene  # noqa: E402

from gsexp.render import make_settings, render  # noqa: E402


def grads(g, cam, settings, weights):
    g = g.map(lambda t: t.detach().clone().requires_grad_())
    out = render(g, cam, settings, background=(0.2, 0.3, 0.1))
    (out.image * weights).sum().backward()
    return out.image.detach(), {k: getattr(g, k).grad for k in ("means", "log_scales", "quats", "opacity_logits", "sh")}


def main():
    if not torch.cuda.is_available():
        sys.exit("gemm_check.py: needs a CUDA GPU (it compares CUDA kernels)")
    worst = {}
    for name in ("vanilla", "tc_gs"):
        for seed, n, w, h in [(0, 300, 77, 53), (1, 600, 160, 128), (2, 2000, 320, 240), (3, 5000, 640, 480)]:
            g, cam = cuda_scene(seed, n, w, h, 2)
            weights = torch.randn(3, h, w, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
            base = make_settings(name, intersect="accutile")
            image, exact = grads(g, cam, base, weights)
            for mode in ("gemm_fp32", "gemm_tf32"):
                image_mode, got = grads(g, cam, base.replace(backward=mode), weights)
                assert torch.equal(image, image_mode), "the forward changed with the backward mode"
                errors = {k: ((got[k] - exact[k]).abs().max() / exact[k].abs().max().clamp_min(1e-30)).item()
                          for k in exact}
                worst[mode] = max(worst.get(mode, 0.0), *errors.values())
                print(f"{name:8s} seed {seed} {w}x{h} n={n} {mode}: max rel {max(errors.values()):.2e}  "
                      + " ".join(f"{k}={v:.1e}" for k, v in errors.items()), flush=True)
    print("WORST", worst)
    ok = worst["gemm_fp32"] < 1e-4 and worst["gemm_tf32"] < 5e-3
    print("GEMM_CHECK", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
