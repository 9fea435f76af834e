"""Stage 4: front-to-back alpha blending per 16x16 tile, vectorised like the CUDA kernel.

Forward, without autograd: all tiles walk their depth-sorted lists together in rounds of
ROUND Gaussians, an [active tiles, ROUND, 256] alpha matrix per round, transmittance and
colour carried between rounds; a tile leaves once all its pixels have stopped. For the
backward each round keeps its contributing (pair, pixel) entries, the transmittance T_e
before each, and the colour that lies behind it.

Backward, round by round: alpha is recomputed for the contributing entries with autograd
(same formula, bit-identical values) and the pixel gradient becomes d alpha and d colour in
closed form, as the CUDA backward does:
  dC/dc_e = alpha_e T_e,   dC/dalpha_e = T_e c_e - behind_e / (1 - alpha_e),
  dT_final/dalpha_e = -T_final / (1 - alpha_e),
with behind_e the colour composited after entry e. Working in rounds keeps every tensor
small (a large fresh allocation costs more than the arithmetic on this CPU).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsexp.render.constants import T_MIN, TILE_SIZE
from gsexp.render.reference.formulas import Formula, Rows
from gsexp.render.reference.tiles import TileLists

ROUND = 32  # Gaussians per tile per round
PIXELS = TILE_SIZE * TILE_SIZE


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


def _local_xy(pixel: torch.Tensor, dtype):
    return (pixel % TILE_SIZE).to(dtype), (pixel // TILE_SIZE).to(dtype)


def _segment_cumsum(x: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Inclusive cumulative sum of x [E, C] restarting wherever key [E] changes."""
    total = torch.cumsum(x, 0)
    idx = torch.arange(len(key), device=key.device)
    start = torch.ones_like(key, dtype=torch.bool)
    start[1:] = key[1:] != key[:-1]
    first = torch.cummax(torch.where(start, idx, 0), 0).values
    return total - total[first] + x[first]


@dataclass
class RoundEntries:
    """One round's contributing entries and what the backward needs of each."""

    pair: torch.Tensor    # [E] index into the sorted pair lists
    pixel: torch.Tensor   # [E] tile-pixel id = tile * 256 + pixel in tile
    trans: torch.Tensor   # [E] transmittance before the entry
    behind: torch.Tensor  # [E, 3] colour composited after the entry (prefix until finished)


@torch.no_grad()
def blend_forward(means2d, conics, opacities, colors, tiles: TileLists, formula: Formula,
                  width: int, height: int, keep_entries: bool):
    """Colour [T*256, 3] (float64, no background), final T [T*256], n_contrib [T*256] per
    tile-pixel, and the rounds' entries when `keep_entries`."""
    device, dtype = means2d.device, means2d.dtype
    num_tiles = tiles.tiles_x * tiles.tiles_y
    starts, ends = tiles.tile_ranges.unbind(1)
    lengths = ends - starts
    u, v = _local_xy(torch.arange(PIXELS, device=device), dtype)
    tile = torch.arange(num_tiles, device=device)
    done = ((tile[:, None] % tiles.tiles_x) * TILE_SIZE + u >= width) \
        | ((tile[:, None] // tiles.tiles_x) * TILE_SIZE + v >= height)
    trans = torch.ones(num_tiles, PIXELS, dtype=dtype, device=device)
    rgb = torch.zeros(num_tiles * PIXELS, 3, dtype=torch.float64, device=device)
    n_contrib = torch.zeros(num_tiles, PIXELS, dtype=torch.long, device=device)
    colors = colors.double()
    rounds = []
    active = tile[(lengths > 0) & ~done.all(1)]
    offsets = torch.arange(ROUND, device=device)
    first = 0
    while len(active):
        pos = first + offsets[None]                                     # [A, R]
        in_list = pos < lengths[active, None]
        pair = (starts[active, None] + pos).clamp(max=len(tiles.gauss_ids) - 1)
        rows = gather_rows(means2d, conics, opacities, tiles, pair)
        alpha, keep = formula(Rows(*(t.unsqueeze(-1) for t in rows)), u, v)  # [A, R, 256]
        keep &= in_list[..., None] & ~done[active, None, :]
        t_after = trans[active, None, :] * torch.cumprod(torch.where(keep, 1 - alpha, 1.0), 1)
        live = keep & (t_after >= T_MIN)  # the entry that would drop T below T_MIN stops the pixel
        t_before = torch.cat([trans[active, None, :], t_after[:, :-1]], 1)

        if keep_entries:  # grouped by pixel in depth order, for the running colour sum
            a, p, r = live.transpose(1, 2).nonzero(as_tuple=True)
        else:
            a, r, p = live.nonzero(as_tuple=True)
        ids = active[a] * PIXELS + p
        e_pair = pair[a, r]
        t_e = t_before[a, r, p]
        contrib = (alpha[a, r, p] * t_e).double()[:, None] * colors[tiles.gauss_ids[e_pair]]
        if keep_entries:
            rounds.append(RoundEntries(e_pair, ids, t_e, _segment_cumsum(contrib, ids) + rgb[ids]))
        rgb.index_add_(0, ids, contrib)

        n_contrib[active] = torch.maximum(n_contrib[active], (live * (pos[..., None] + 1)).amax(1))
        trans[active] = torch.minimum(trans[active], torch.where(t_after >= T_MIN, t_after, 1.0).amin(1))
        done[active] |= t_after[:, -1] < T_MIN
        first += ROUND
        active = active[(lengths[active] > first) & ~done[active].all(1)]

    for e in rounds:  # the prefix becomes what lies behind, now that the total is known
        e.behind = (rgb[e.pixel] - e.behind).to(dtype)
    return rgb, trans.reshape(-1), n_contrib.reshape(-1), rounds


class Blend(torch.autograd.Function):
    """(means2d, conics, opacities, colors) -> per tile-pixel colour and final T."""

    @staticmethod
    def forward(ctx, means2d, conics, opacities, colors, tiles, formula, width, height):
        rgb, final_t, n_contrib, rounds = blend_forward(
            means2d, conics, opacities, colors, tiles, formula, width, height,
            keep_entries=any(ctx.needs_input_grad[:4]))
        ctx.save_for_backward(means2d, conics, opacities, colors, final_t)
        ctx.rounds, ctx.tiles, ctx.formula = rounds, tiles, formula
        ctx.mark_non_differentiable(n_contrib)
        return rgb.to(colors.dtype), final_t, n_contrib

    @staticmethod
    def backward(ctx, grad_rgb, grad_t, _):
        *inputs, final_t = ctx.saved_tensors
        leaves = [x.detach().requires_grad_() for x in inputs]
        means2d, conics, opacities, colors = leaves
        with torch.enable_grad():
            for e in ctx.rounds:
                u, v = _local_xy(e.pixel % PIXELS, means2d.dtype)
                alpha, _ = ctx.formula(gather_rows(means2d, conics, opacities, ctx.tiles, e.pair), u, v)
                color = colors.index_select(0, ctx.tiles.gauss_ids.index_select(0, e.pair))
                g_rgb, g_t = grad_rgb.index_select(0, e.pixel), grad_t.index_select(0, e.pixel)
                with torch.no_grad():
                    one_minus = 1 - alpha
                    d_alpha = ((e.trans[:, None] * color - e.behind / one_minus[:, None]) * g_rgb).sum(1) \
                        - g_t * final_t.index_select(0, e.pixel) / one_minus
                    d_color = (alpha * e.trans)[:, None] * g_rgb
                torch.autograd.backward((alpha, color), (d_alpha, d_color))
        grads = [x.grad if x.grad is not None else torch.zeros_like(x) for x in leaves]
        return (*grads, None, None, None, None)


def blend(proj, tiles: TileLists, formula: Formula, width: int, height: int,
          background: torch.Tensor):
    """Composite the sorted tile lists. Returns image [3,H,W], alpha [H,W], n_contrib [H,W]."""
    rgb, final_t, n_contrib = Blend.apply(proj.means2d, proj.conics, proj.opacities, proj.colors,
                                          tiles, formula, width, height)
    rgb = rgb + final_t[:, None] * background

    def to_image(x):  # [tiles * 256, C] -> [C, H, W]
        x = x.reshape(tiles.tiles_y, tiles.tiles_x, TILE_SIZE, TILE_SIZE, -1).permute(4, 0, 2, 1, 3)
        return x.reshape(x.shape[0], tiles.tiles_y * TILE_SIZE, tiles.tiles_x * TILE_SIZE)[:, :height, :width]

    return to_image(rgb), to_image(1 - final_t[:, None])[0], to_image(n_contrib.int()[:, None])[0]
