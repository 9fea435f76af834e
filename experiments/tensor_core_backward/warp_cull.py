"""How much walking backward=exact_cull saves, counted on the CPU (csrc/backward.cu's CULL kernel).

    python experiments/tensor_core_backward/warp_cull.py [--ply PLY] [--up -y] [--sizes 1920x1080]
        [--views 2] [--intersect accutile]

The blend backward is bound by instruction issue (README: ncu), and a warp issues one step per
(warp, list entry) it walks: a full step with the nine warp sums and the atomics when any of its
lanes' pixels takes the entry, a short one when none does. Per scene and camera this counts those
steps, for the plain kernel's 16x2-pixel warps and for exact_cull's 8x4 ones, where a warp also
skips (a very short step) the entries whose ellipse box misses its pixels and those behind its
last contributor. The skip test is mirrored here in float32 (reach_mask) and every skipped step is
checked against the backward's own fp32 test: a skipped entry with a pixel whose alpha passes
would make the culled kernel wrong, and is counted as a violation (the script exits 1).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gsexp.render.constants import ALPHA_MAX, ALPHA_MIN  # noqa: E402
from gsexp.render.reference.blend import blend_forward  # noqa: E402
from gsexp.render.reference.formulas import make_formula  # noqa: E402
from gsexp.render.reference.preprocess import preprocess  # noqa: E402
from gsexp.render.reference.tiles import tile_lists  # noqa: E402

LAYOUTS = {"16x2": (16, 2), "8x4": (8, 4)}  # warp width x height in pixels; 8 warps a 16x16 tile


def reach_box(conics: torch.Tensor, opacities: torch.Tensor):
    """csrc/backward.cu reach_mask's box in float32: (half-width, half-height, kind) per Gaussian,
    kind 0: never visible (every warp skips), 1: box, 2: no skip (thin or bad conic)."""
    a, b, c = conics.float().unbind(-1)
    o = opacities.float()
    ac = a * c
    det = ac - b * b
    t = 2.0 * torch.log(255.0 * o) / det
    ex = torch.sqrt(torch.clamp(t * c, min=0)) * 1.01 + 0.05
    ey = torch.sqrt(torch.clamp(t * a, min=0)) * 1.01 + 0.05
    kind = torch.where(det >= 1e-3 * ac, 1, 2)
    kind = torch.where(o >= ALPHA_MIN, kind, torch.where(o < ALPHA_MIN, 0, 2))  # NaN: no skip
    return ex, ey, kind


def count(proj, width: int, height: int) -> dict:
    """{layout: {steps, taken, skipped}} over the tiles' walks, plus 'violations' (skipped warp
    steps where some pixel's alpha passes the backward's test) for 8x4."""
    tiles = tile_lists(proj, width, height)
    _, _, n_contrib, _ = blend_forward(proj.means2d, proj.conics, proj.opacities, proj.colors, tiles,
                                       make_formula("vanilla"), width, height, False)
    last = n_contrib.long().reshape(-1, 256)  # tile-pixel order: tile * 256 + y * 16 + x
    ex, ey, kind = reach_box(proj.conics, proj.opacities)
    a, b, c = (v.float() for v in proj.conics.unbind(-1))
    o, means = proj.opacities.float(), proj.means2d.float()
    lx, ly = torch.arange(16).repeat(16), torch.arange(16).repeat_interleave(16)
    out = {name: {"steps": 0, "taken": 0, "skipped": 0} for name in LAYOUTS}
    out["violations"] = 0
    for t, (s, e) in enumerate(tiles.tile_ranges.tolist()):
        block_last = int(last[t].max()) if e > s else 0
        if block_last == 0:
            continue
        ids = tiles.gauss_ids[s:s + block_last]
        ox, oy = (t % tiles.tiles_x) * 16, (t // tiles.tiles_x) * 16
        dx = means[ids, :1] - (lx + ox).float()  # as the kernel: mean - pixel, fp32
        dy = means[ids, 1:] - (ly + oy).float()
        power = -0.5 * (a[ids, None] * dx * dx + c[ids, None] * dy * dy) - b[ids, None] * dx * dy
        alpha = torch.clamp(o[ids, None] * torch.exp(power), max=ALPHA_MAX)
        passes = (power <= 0) & (alpha >= ALPHA_MIN)  # [entries, 256]
        position = torch.arange(1, block_last + 1)[:, None]
        takes = passes & (position <= last[t][None])
        for name, (bw, bh) in LAYOUTS.items():
            shape = (block_last, 16 // bh, bh, 16 // bw, bw)
            warp_takes = takes.reshape(shape).any(-1).any(2)  # [entries, rows, cols]
            res = out[name]
            res["steps"] += warp_takes.numel()
            res["taken"] += int(warp_takes.sum())
            if name == "16x2":
                continue  # the plain kernel skips nothing
            warp_last = last[t].reshape(16 // bh, bh, 16 // bw, bw).amax(dim=(1, 3))
            behind = position[:, :, None] > warp_last[None]
            x0 = (ox + bw * torch.arange(16 // bw)).float()
            y0 = (oy + bh * torch.arange(16 // bh)).float()
            mx, my, k = means[ids, 0], means[ids, 1], kind[ids]
            cols = (x0[None] <= (mx + ex[ids])[:, None]) & (x0[None] + (bw - 1) >= (mx - ex[ids])[:, None])
            rows = (y0[None] <= (my + ey[ids])[:, None]) & (y0[None] + (bh - 1) >= (my - ey[ids])[:, None])
            reach = (rows[:, :, None] & cols[:, None, :] & (k == 1)[:, None, None]) | (k == 2)[:, None, None]
            skipped = ~reach | behind
            res["skipped"] += int(skipped.sum())
            out["violations"] += int((skipped & ~behind & passes.reshape(shape).any(-1).any(2)).sum())
            out["violations"] += int((skipped & warp_takes).sum())
    return out


def table_rows(label: str, res: dict) -> list[str]:
    rows = []
    for name in LAYOUTS:
        r = res[name]
        steps = max(r["steps"], 1)
        rows.append(f"| {label} | {name} | {r['steps']:,} | {r['taken'] / steps:.1%} | "
                    f"{(r['steps'] - r['taken'] - r['skipped']) / steps:.1%} | {r['skipped'] / steps:.1%} |")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python experiments/tensor_core_backward/warp_cull.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ply", type=Path, help="default <shared>/data/scenes/biker.compressed.ply")
    p.add_argument("--up", default="-y", help="the scene's up axis (INRIA/COLMAP PLYs: -y; Blender: z)")
    p.add_argument("--sizes", default="1920x1080")
    p.add_argument("--views", type=int, default=2)
    p.add_argument("--intersect", default="accutile", choices=("aabb", "snugbox", "accutile"))
    a = p.parse_args(argv)
    from gsexp.bench.cameras import orbit_cameras, parse_up
    from gsexp.bench.models import load_gaussians
    from gsexp.paths import shared_dir

    ply = a.ply or shared_dir() / "data/scenes/biker.compressed.ply"
    if not ply.is_file():
        p.error(f"--ply: {ply} is not a file")
    try:
        sizes = [tuple(int(v) for v in s.split("x")) for s in a.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes: expected WxH[,WxH...], got {a.sizes!r}")
    g = load_gaussians(ply)
    print(f"{ply.name}: {len(g.means):,} Gaussians, intersect={a.intersect}")
    print("| view | warps | warp x entry steps | full (some lane takes it) | short (none does) | skipped |")
    print("|---|---|---:|---:|---:|---:|")
    violations = 0
    with torch.no_grad():
        for w, h in sizes:
            cams, _ = orbit_cameras(g.means, a.views, w, h, up=parse_up(a.up))
            for i, cam in enumerate(cams):
                res = count(preprocess(g, cam, intersect=a.intersect), w, h)
                violations += res["violations"]
                print("\n".join(table_rows(f"{w}x{h} #{i}", res)), flush=True)
    print(f"skipped steps with a pixel whose alpha passes: {violations}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
