"""Stage 4: front-to-back alpha blending, vectorised like the CUDA kernel.

Forward, without autograd: pixels are processed in blocks of BLOCK x BLOCK. Each block
walks the depth-sorted list of its 16x16 tile, all blocks together in rounds of ROUND
Gaussians: an [active blocks, ROUND, BLOCK^2] alpha matrix per round, transmittance carried
between rounds; a block leaves once all its pixels have stopped. When the formula is exact
(fp32), a block skips the pairs whose alpha >= 1/255 ellipse misses it: those would be
skipped pixel by pixel anyway, so the result is unchanged and much less is evaluated.

For the backward each round keeps its contributing (pair, pixel) entries, the transmittance
T_e before each, and the colour composited behind it. The backward recomputes alpha for
those entries with autograd (same formula, bit-identical values) and turns the pixel
gradient into d alpha and d colour in closed form, as the CUDA backward does:
  dC/dc_e = alpha_e T_e,   dC/dalpha_e = T_e c_e - behind_e / (1 - alpha_e),
  dT_final/dalpha_e = -T_final / (1 - alpha_e).
Everything runs round by round: small tensors (a large fresh allocation costs more than
the arithmetic on a CPU).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsexp.render.constants import ALPHA_MIN, T_MIN, TILE_SIZE
from gsexp.render.reference.formulas import Formula, Rows
from gsexp.render.reference.gemm_backward import GemmBackward
from gsexp.render.reference.tiles import TileLists

ROUND = 32   # list positions per block per round
BLOCK = 4    # pixels per block side (divides TILE_SIZE)
SUB = TILE_SIZE // BLOCK
TILE_PIXELS = TILE_SIZE * TILE_SIZE


def gather_rows(means2d, conics, opacities, tiles: TileLists, pair: torch.Tensor) -> Rows:
    """Per-pair Gaussian data, shaped like `pair`. index_select, whose backward is a fast
    index_add (plain indexing's backward is an accumulating index_put)."""
    flat = pair.reshape(-1)
    g = tiles.gauss_ids.index_select(0, flat)
    t = tiles.tile_ids.index_select(0, flat)
    m = means2d.index_select(0, g).reshape(pair.shape + (2,))
    con = conics.index_select(0, g).reshape(pair.shape + (3,))
    o = opacities.index_select(0, g).reshape(pair.shape)
    ox = ((t % tiles.tiles_x) * TILE_SIZE).to(means2d.dtype).reshape(pair.shape)
    oy = ((t // tiles.tiles_x) * TILE_SIZE).to(means2d.dtype).reshape(pair.shape)
    return Rows(m[..., 0], m[..., 1], con[..., 0], con[..., 1], con[..., 2], o, ox, oy)


def _tile_xy(pixel: torch.Tensor, dtype):
    """Coordinates within the tile of a tile-pixel id (tile * 256 + y * 16 + x)."""
    p = pixel % TILE_PIXELS
    return (p % TILE_SIZE).to(dtype), (p // TILE_SIZE).to(dtype)


def _segment_cumsum(x: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Inclusive cumulative sum of x [E, C] restarting wherever key [E] changes."""
    total = torch.cumsum(x, 0)
    idx = torch.arange(len(key), device=key.device)
    start = torch.ones_like(key, dtype=torch.bool)
    start[1:] = key[1:] != key[:-1]
    first = torch.cummax(torch.where(start, idx, 0), 0).values
    return total - total[first] + x[first]


def block_lists(means2d, conics, opacities, tiles: TileLists, tight: bool):
    """Each tile's pairs handed to its SUB x SUB blocks: (pair index [K], block ranges [B, 2]),
    sorted by block then depth. block id = tile * SUB^2 + (y // BLOCK) * SUB + x // BLOCK."""
    num_pairs, nb = len(tiles.gauss_ids), SUB * SUB
    sub = torch.arange(nb, device=means2d.device)
    if tight:
        # alpha >= 1/255 needs power >= -ln(255 o): an ellipse with half-extents
        # sqrt(2 ln(255 o) cov_xx), ... (cov = conic^-1); one pixel of margin for rounding.
        a, b, c = conics.unbind(-1)
        level = torch.log((255.0 * opacities).clamp_min(1e-30)).clamp_min(0)
        det = (a * c - b * b).clamp_min(1e-30)
        ext = torch.stack([(2 * level * c / det).sqrt(), (2 * level * a / det).sqrt()], -1) + 1
        ext = torch.where((opacities >= ALPHA_MIN)[:, None], ext, -1e9)  # never reaches 1/255
        lo, hi = means2d - ext, means2d + ext
        g, t = tiles.gauss_ids, tiles.tile_ids
        bx0 = ((t % tiles.tiles_x) * TILE_SIZE)[:, None] + (sub % SUB) * BLOCK  # [M, nb]
        by0 = ((t // tiles.tiles_x) * TILE_SIZE)[:, None] + (sub // SUB) * BLOCK
        lo, hi = lo.index_select(0, g), hi.index_select(0, g)
        hit = (bx0 <= hi[:, 0:1]) & (bx0 + BLOCK - 1 >= lo[:, 0:1]) \
            & (by0 <= hi[:, 1:2]) & (by0 + BLOCK - 1 >= lo[:, 1:2])
        pair, s = hit.nonzero(as_tuple=True)
    else:
        pair = torch.arange(num_pairs, device=sub.device).repeat_interleave(nb)
        s = sub.repeat(num_pairs)
    block = tiles.tile_ids[pair] * nb + s
    order = torch.sort(block, stable=True).indices  # stable: depth order kept within a block
    pair, block = pair[order], block[order]
    counts = torch.bincount(block, minlength=tiles.tiles_x * tiles.tiles_y * nb)
    ends = torch.cumsum(counts, 0)
    return pair, torch.stack([ends - counts, ends], 1)


@dataclass
class RoundEntries:
    """One round's contributing entries and what the backward needs of each."""

    pair: torch.Tensor    # [E] index into the sorted pair lists
    pixel: torch.Tensor   # [E] tile-pixel id = tile * 256 + y * 16 + x
    trans: torch.Tensor   # [E] transmittance before the entry
    behind: torch.Tensor  # [E, C] colour composited after the entry (the prefix until finished)


def _record_entries(rounds, live, alpha, t_after, trans, active, pair, pixel_id, tiles,
                    tile_start, colors, rgb, n_contrib):
    """Extract one round's contributing entries (grouped by pixel, in depth order), add them
    to rgb / n_contrib and update the carried transmittance."""
    num_p = BLOCK * BLOCK
    # Flat indices into [A, R, P]: multi-dimensional advanced indexing is slow on CPU.
    a, p, r = live.transpose(1, 2).nonzero(as_tuple=True)
    lin = (a * ROUND + r) * num_p + p
    bp = active.index_select(0, a) * num_p + p
    ids = pixel_id.view(-1).index_select(0, bp)
    e_pair = pair.view(-1).index_select(0, a * ROUND + r)
    e_alpha = alpha.view(-1).index_select(0, lin)
    t_e = torch.where(r > 0, t_after.view(-1).index_select(0, (lin - num_p).clamp_min(0)),
                      trans.view(-1).index_select(0, bp))
    contrib = (e_alpha * t_e).double()[:, None] * colors.index_select(0, tiles.gauss_ids.index_select(0, e_pair))
    rounds.append(RoundEntries(e_pair, ids, t_e, _segment_cumsum(contrib, ids) + rgb.index_select(0, ids)))
    rgb.index_add_(0, ids, contrib)
    n_contrib.scatter_reduce_(0, ids, _ranks(e_pair, tiles, tile_start), reduce="amax")  # INRIA's: last contributor's position
    trans.view(-1).scatter_reduce_(0, bp, t_after.view(-1).index_select(0, lin), reduce="amin")


def _ranks(pair, tiles: TileLists, tile_start) -> torch.Tensor:
    """1-based position of each pair in its tile's list, shaped like `pair`."""
    flat = pair.reshape(-1)
    return (flat - tile_start.index_select(0, tiles.tile_ids.index_select(0, flat)) + 1).reshape(pair.shape)


def _round_half(x: torch.Tensor) -> torch.Tensor:
    return x.half().to(x.dtype)


def _composite(alpha, keep, trans, done, active, pair, pixel_id, tiles, tile_start, colors, rgb, n_contrib,
               rounds):
    """One round in fp32 transmittance: vectorised over the round with a cumulative product.
    With `rounds` (a list) each contributing entry is recorded for the backward."""
    t_after = trans[active, None, :] * torch.cumprod(torch.where(keep, 1 - alpha, 1.0), 1)
    live = keep & (t_after >= T_MIN)  # the entry that would drop T below T_MIN stops the pixel
    if rounds is not None:
        _record_entries(rounds, live, alpha, t_after, trans, active, pair, pixel_id, tiles,
                        tile_start, colors, rgb, n_contrib)
    else:  # dense compositing, no per-entry bookkeeping
        t_before = torch.cat([trans[active, None, :], t_after[:, :-1]], 1)
        weight = torch.where(live, alpha * t_before, 0.0)
        flat = pair.reshape(-1)
        row_colors = colors.index_select(0, tiles.gauss_ids.index_select(0, flat)).reshape(*pair.shape, -1)
        ids = pixel_id[active].reshape(-1)
        rgb.index_add_(0, ids, torch.bmm(weight.transpose(1, 2).double(), row_colors).reshape(len(ids), -1))
        n_contrib.scatter_reduce_(0, ids, (live * _ranks(pair, tiles, tile_start)[..., None]).amax(1).reshape(-1),
                                  reduce="amax")
        trans[active] = torch.minimum(trans[active], torch.where(live, t_after, 1.0).amin(1))
    done[active] |= t_after[:, -1] < T_MIN


def _composite_half(alpha, keep, trans, done, active, pair, pixel_id, tiles, tile_start, colors, rgb, n_contrib):
    """One round with T and colour held in fp16, entry by entry, as the kernel's half_blend:
    next_T = fp16(T (1 - alpha)); stop when it falls below T_MIN; C = fp16(C + c alpha T)."""
    ids = pixel_id[active].reshape(-1)
    num_a, num_r, num_p = alpha.shape
    row_colors = colors.index_select(0, tiles.gauss_ids.index_select(0, pair.reshape(-1))).reshape(num_a, num_r, -1)
    row_colors = row_colors.to(alpha.dtype)
    t, c = trans[active].clone(), rgb.index_select(0, ids).reshape(num_a, num_p, -1).to(alpha.dtype)
    stopped, rank = done[active].clone(), _ranks(pair, tiles, tile_start)
    last = torch.zeros(num_a, num_p, dtype=torch.long, device=alpha.device)
    for r in range(num_r):
        a, k = alpha[:, r], keep[:, r] & ~stopped
        next_t = _round_half(t * (1 - a))
        live = k & (next_t >= T_MIN)
        stopped |= k & ~live
        c = torch.where(live[..., None], _round_half(c + row_colors[:, r, None, :] * (a * t)[..., None]), c)
        t = torch.where(live, next_t, t)
        last = torch.where(live, rank[:, r, None], last)
    rgb[ids] = c.reshape(len(ids), -1).to(rgb.dtype)
    n_contrib.scatter_reduce_(0, ids, last.reshape(-1), reduce="amax")
    trans[active] = t
    done[active] = stopped


@torch.no_grad()
def blend_forward(means2d, conics, opacities, colors, tiles: TileLists, formula: Formula,
                  width: int, height: int, keep_entries: bool):
    """Colour [T*256, C] (float64, no background; C: the colours' channels), final T [T*256],
    n_contrib [T*256] per tile-pixel, and the rounds' entries when `keep_entries`."""
    device, dtype = means2d.device, means2d.dtype
    half_blend = getattr(formula, "half_blend", False)
    if half_blend and keep_entries:
        raise ValueError("render: half_blend (TC-GS's fp16 accumulation) is emulated by the torch reference for "
                         "rendering only; train with backend='cuda' (rasterizer=tc_gs), or render under torch.no_grad()")
    pair_of, ranges = block_lists(means2d, conics, opacities, tiles, formula.exact)
    starts, lengths = ranges[:, 0], ranges[:, 1] - ranges[:, 0]
    num_blocks = len(ranges)
    block = torch.arange(num_blocks, device=device)
    tile, s = block // (SUB * SUB), block % (SUB * SUB)
    lp = torch.arange(BLOCK * BLOCK, device=device)
    bu = (s % SUB * BLOCK)[:, None] + lp % BLOCK              # [B, P] coordinates in the tile
    bv = (s // SUB * BLOCK)[:, None] + lp // BLOCK
    pixel_id = tile[:, None] * TILE_PIXELS + bv * TILE_SIZE + bu  # [B, P] tile-pixel ids
    done = ((tile % tiles.tiles_x * TILE_SIZE)[:, None] + bu >= width) \
        | ((tile // tiles.tiles_x * TILE_SIZE)[:, None] + bv >= height)
    u_of, v_of = bu.to(dtype), bv.to(dtype)

    num_pixels = tiles.tiles_x * tiles.tiles_y * TILE_PIXELS
    trans = torch.ones(num_blocks, BLOCK * BLOCK, dtype=dtype, device=device)
    rgb = torch.zeros(num_pixels, colors.shape[1], dtype=torch.float64, device=device)
    n_contrib = torch.zeros(num_pixels, dtype=torch.long, device=device)
    colors = colors.double()
    tile_start = tiles.tile_ranges[:, 0].contiguous()
    rounds = []
    active = block[(lengths > 0) & ~done.all(1)]
    offsets = torch.arange(ROUND, device=device)
    first = 0
    while len(active):
        pos = first + offsets[None]                                     # [A, R]
        in_list = pos < lengths[active, None]
        pair = pair_of[(starts[active, None] + pos).clamp(max=max(len(pair_of) - 1, 0))]
        rows = gather_rows(means2d, conics, opacities, tiles, pair)
        alpha, keep = formula(Rows(*(t.unsqueeze(-1) for t in rows)),
                              u_of[active, None, :], v_of[active, None, :])  # [A, R, P]
        keep &= in_list[..., None] & ~done[active, None, :]
        if half_blend:  # TC-GS's fp16 accumulation: sequential, rounded after every entry
            _composite_half(alpha, keep, trans, done, active, pair, pixel_id, tiles, tile_start, colors, rgb,
                            n_contrib)
        else:
            _composite(alpha, keep, trans, done, active, pair, pixel_id, tiles, tile_start, colors, rgb,
                       n_contrib, rounds if keep_entries else None)
        first += ROUND
        active = active[(lengths[active] > first) & ~done[active].all(1)]

    for e in rounds:  # the prefix becomes what lies behind, now that the total is known
        e.behind = (rgb[e.pixel] - e.behind).to(dtype)
    final_t = torch.ones(num_pixels, dtype=dtype, device=device)
    final_t[pixel_id.reshape(-1)] = trans.reshape(-1)
    return rgb, final_t, n_contrib, rounds


class Blend(torch.autograd.Function):
    """(means2d, conics, opacities, colors) -> per tile-pixel colour and final T. absgrad: None,
    or an [N,2] tensor the backward adds AbsGS's statistic to (module docstring of absgrad)."""

    @staticmethod
    def forward(ctx, means2d, conics, opacities, colors, tiles, formula, width, height, absgrad=None):
        rgb, final_t, n_contrib, rounds = blend_forward(
            means2d, conics, opacities, colors, tiles, formula, width, height,
            keep_entries=any(ctx.needs_input_grad[:4]))
        ctx.save_for_backward(means2d, conics, opacities, colors, final_t)
        ctx.rounds, ctx.tiles, ctx.formula, ctx.absgrad = rounds, tiles, formula, absgrad
        ctx.mark_non_differentiable(n_contrib)
        return rgb.to(colors.dtype), final_t, n_contrib

    @staticmethod
    def backward(ctx, grad_rgb, grad_t, _):
        if getattr(ctx.formula, "backward", "exact") != "exact":
            return (*gemm_form_backward(ctx, grad_rgb, grad_t), None, None, None, None, None)
        *inputs, final_t = ctx.saved_tensors
        leaves = [x.detach().requires_grad_() for x in inputs]
        means2d, conics, opacities, colors = leaves
        with torch.enable_grad():
            for e in ctx.rounds:
                u, v = _tile_xy(e.pixel, means2d.dtype)
                rows = gather_rows(means2d, conics, opacities, ctx.tiles, e.pair)
                if ctx.absgrad is not None:  # each entry's own d/d mean: one pixel's contribution
                    rows.mx.retain_grad()
                    rows.my.retain_grad()
                alpha, _ = ctx.formula(rows, u, v)
                gauss = ctx.tiles.gauss_ids.index_select(0, e.pair)
                color = colors.index_select(0, gauss)
                with torch.no_grad():
                    d_alpha, d_color = _pixel_grads(e, alpha, color, grad_rgb, grad_t, final_t)
                torch.autograd.backward((alpha, color), (d_alpha, d_color))
                if ctx.absgrad is not None:
                    per_entry = torch.stack([rows.mx.grad, rows.my.grad], -1).abs()
                    ctx.absgrad.index_add_(0, gauss, per_entry.to(ctx.absgrad.dtype))
        grads = [x.grad if x.grad is not None else torch.zeros_like(x) for x in leaves]
        return (*grads, None, None, None, None, None)


def _pixel_grads(e, alpha, color, grad_rgb, grad_t, final_t):
    """dL/dalpha and dL/dcolour of a round's entries, in closed form (module docstring)."""
    g_rgb, g_t = grad_rgb.index_select(0, e.pixel), grad_t.index_select(0, e.pixel)
    one_minus = 1 - alpha
    d_alpha = ((e.trans[:, None] * color - e.behind / one_minus[:, None]) * g_rgb).sum(1) \
        - g_t * final_t.index_select(0, e.pixel) / one_minus
    return d_alpha, (alpha * e.trans)[:, None] * g_rgb


@torch.no_grad()
def gemm_form_backward(ctx, grad_rgb, grad_t):
    """The backward as a tensor-core kernel computes it (gemm_backward.py): no autograd."""
    means2d, conics, opacities, colors, final_t = ctx.saved_tensors
    tiles, formula = ctx.tiles, ctx.formula
    gemm = GemmBackward(formula.backward, formula.blend)
    d_colors = torch.zeros_like(colors)
    for e in ctx.rounds:
        u, v = _tile_xy(e.pixel, means2d.dtype)
        rows = gather_rows(means2d, conics, opacities, tiles, e.pair)
        alpha, _ = formula(rows, u, v)
        gauss = tiles.gauss_ids.index_select(0, e.pair)
        d_alpha, d_color = _pixel_grads(e, alpha, colors.index_select(0, gauss), grad_rgb, grad_t, final_t)
        d_colors.index_add_(0, gauss, d_color)
        gemm.add(rows, formula.exponent(rows, u, v), u, v, alpha, d_alpha, e.pair)
    every_pair = torch.arange(len(tiles.gauss_ids), device=means2d.device)
    pair_rows = gather_rows(means2d, conics, opacities, tiles, every_pair)
    return (*gemm.grads(pair_rows, tiles.gauss_ids, means2d, conics, opacities), d_colors)


def blend(proj, tiles: TileLists, formula: Formula, width: int, height: int,
          background: torch.Tensor, depth: bool = False, absgrad: torch.Tensor | None = None):
    """Composite the sorted tile lists. Returns image [3,H,W], alpha [H,W], n_contrib [H,W].
    With depth: image [4,H,W], its last channel the accumulated depth sum_i w_i z_i (the
    depths blended as a fourth colour over a background of 0). absgrad: an [N,2] tensor to
    which the backward adds, per Gaussian, the sum over its pixels of |dL_pixel / d mean2d|
    (AbsGS; exact backward only)."""
    colors = proj.colors
    if depth:
        colors = torch.cat([colors, proj.depths[:, None].to(colors.dtype)], 1)
        bg = background.to(colors.dtype)
        background = torch.cat([bg, bg.new_zeros(1)])
    rgb, final_t, n_contrib = Blend.apply(proj.means2d, proj.conics, proj.opacities, colors,
                                          tiles, formula, width, height, absgrad)
    rgb = rgb + final_t[:, None] * background

    def to_image(x):  # [tiles * 256, C] -> [C, H, W]
        x = x.reshape(tiles.tiles_y, tiles.tiles_x, TILE_SIZE, TILE_SIZE, -1).permute(4, 0, 2, 1, 3)
        return x.reshape(x.shape[0], tiles.tiles_y * TILE_SIZE, tiles.tiles_x * TILE_SIZE)[:, :height, :width]

    return to_image(rgb), to_image(1 - final_t[:, None])[0], to_image(n_contrib.int()[:, None])[0]
