"""Per-photo appearance compensation. appearance=affine: each training photo gets a colour
transform, rendered colour -> M_i colour + b_i (M_i 3x3, b_i 3), learnt with the model from
identity, with reg x |[M_i - I, b_i]|^2 added to the loss so it explains only what the photos do
not share (exposure, white balance). appearance=bilateral_grid: each photo gets a grid of such
transforms over (x, y, luma) instead (Wang et al. 2024, as gsplat's post-processing), so the
change may vary across the photo and with brightness (vignetting, local tone mapping); reg x
the grid's total variation keeps it smooth. The test views have no transform: they are evaluated
as rendered, and cc_psnr (gsexp.metrics) scores them after their best affine fit, as gsplat does."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gsexp.config import APPEARANCES
from gsexp.train.per_view import PerView

LUMA = (0.299, 0.587, 0.114)  # the bilateral grid's guide: Rec. 601 luma of the render


def transform(image: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """[3, H, W] image through (identity + d) applied to [r, g, b, 1]; d is [3, 4] or, one per
    pixel, [3, 4, H, W]."""
    if d.dim() == 2:  # one small GEMM: (I + M) [3, HW] + b
        eye = torch.eye(3, dtype=d.dtype, device=d.device)
        return torch.addmm(d[:, 3:], d[:, :3] + eye, image.reshape(3, -1)).view_as(image)
    # Elementwise, not einsum: einsum made it a batched GEMM of one 3x3 matrix per pixel.
    return image + (d[:, :3] * image[None]).sum(1) + d[:, 3]


class AffineAppearance(PerView):
    def __init__(self, num_images: int, device, lr: float = 1e-3, reg: float = 0.01):
        super().__init__((num_images, 3, 4), device, lr, reg, eps=1e-15)  # [M - I | b] per photo

    def apply(self, image: torch.Tensor, view: int) -> torch.Tensor:
        """[3, H, W] render -> the training photo `view`'s colours."""
        return transform(image, self.delta[view])

    def summary(self) -> dict:
        """How far the photos' transforms went from identity (mean over photos)."""
        d = self.delta.detach()
        return {"appearance_mean_change": float(d.square().sum((1, 2)).sqrt().mean())}


class BilateralGridAppearance(PerView):
    """Per photo a [12, luma, y, x] grid of 3x4 transforms' changes from identity, sliced
    trilinearly at each pixel's (x, y, luma)."""

    def __init__(self, num_images: int, device, lr: float = 2e-3, reg: float = 10.0,
                 grid_x: int = 16, grid_y: int = 16, grid_luma: int = 8):
        super().__init__((num_images, 12, grid_luma, grid_y, grid_x), device, lr, reg, eps=1e-15)

    def apply(self, image: torch.Tensor, view: int) -> torch.Tensor:
        """[3, H, W] render -> the training photo `view`'s colours."""
        if image.is_cuda:  # one launch each way (csrc/bilateral.cu): the torch ops' dispatches bound the step
            return _SliceCuda.apply(image, self.delta[view])
        return self.sliced(image, self.delta[view])

    def sliced(self, image: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        """apply() in torch ops, for any device and dtype: the CUDA kernels' reference."""
        _, h, w = image.shape
        weights, xy, wx, wy = self._constants(h, w, image)
        luma = torch.einsum("c,chw->hw", weights, image).clamp(0, 1)
        d = _Slice.apply(grid, luma, xy, wx, wy)  # [12, H, W]
        return transform(image, d.view(3, 4, h, w))

    def _constants(self, h: int, w: int, like: torch.Tensor):
        """The luma weights, the pixel centres as grid coordinates [H, W, 2] and the cells'
        interpolation weights along x [W, grid_x] and y [H, grid_y], made once per size: made
        every step they would cost a host-to-device copy (which waits for the GPU) and a few
        launches, in a step bound by the host."""
        key = (h, w, like.dtype, like.device)
        if getattr(self, "_cached", (None,))[0] != key:
            _, _, _, gy, gx = self.delta.shape
            weights = torch.tensor(LUMA, dtype=like.dtype).to(like.device)
            # Pixel centres in [0, 1], then [-1, 1]; align_corners=True puts the ends on the end cells.
            y, x = ((torch.arange(n, dtype=torch.float64) + 0.5) / n for n in (h, w))
            xy = torch.stack(torch.meshgrid(y, x, indexing="ij")[::-1], -1) * 2 - 1
            self._cached = (key, weights, xy.to(like.device, like.dtype),
                            _hat(x * (gx - 1), gx).to(like.device, like.dtype),
                            _hat(y * (gy - 1), gy).to(like.device, like.dtype))
        return self._cached[1:]

    def regularization(self, view: int) -> torch.Tensor:
        """reg x the grid's total variation: squared differences of neighbouring cells along
        luma, y and x, each averaged over the cells (gsplat's TV loss, for one photo)."""
        g = self.delta[view]
        if g.is_cuda:  # one launch (csrc/bilateral.cu) for the torch ops below
            return self.reg * _TotalVariationCuda.apply(g)
        return self.reg * total_variation(g)

    def summary(self) -> dict:
        """How far the grids went from identity: each photo's RMS change, mean over photos."""
        d = self.delta.detach().flatten(1)
        return {"appearance_mean_change": float(d.square().mean(1).sqrt().mean())}


def total_variation(g: torch.Tensor) -> torch.Tensor:
    """Of a [12, luma, y, x] grid, in torch ops (the CUDA kernel's reference)."""
    tv = g.new_zeros(())
    for axis in (1, 2, 3):
        if g.shape[axis] > 1:  # a one-cell axis has no neighbours
            tv = tv + torch.diff(g, dim=axis).square().mean()
    return tv


def _hat(position: torch.Tensor, cells: int) -> torch.Tensor:
    """[P, cells]: linear interpolation weights of positions in cell units (0 .. cells - 1)."""
    cell = torch.arange(cells, dtype=position.dtype, device=position.device)
    return (1 - (position[:, None] - cell).abs()).clamp_min(0)


class _Slice(torch.autograd.Function):
    """(grid [12, luma, y, x], luma [H, W]) -> the grid sliced at each pixel's (x, y, luma),
    [12, H, W]: grid_sample forward, with the grid's gradient as two small GEMMs. grid_sample's own
    scatters every pixel's gradient into the grid's few cells with atomics, and neighbouring pixels
    share cells: on beer's 1.4 MP photos its backward took 8.5 ms a step, 5x the rest of the step.
    The cells' weights factor: x's and y's are the same for every step (wx, wy), luma's per pixel
    has two terms, so dG = wy^T (dD * w_luma) wx with no atomics."""

    @staticmethod
    def forward(ctx, grid, luma, xy, wx, wy):
        at = torch.cat((xy, luma[..., None] * 2 - 1), -1)[None, None]  # grid_sample's (x, y, z) in [-1, 1]
        ctx.save_for_backward(grid, luma, at, wx, wy)
        return F.grid_sample(grid[None], at, mode="bilinear", padding_mode="border", align_corners=True)[0, :, 0]

    @staticmethod
    def backward(ctx, grad):
        grid, luma, at, wx, wy = ctx.saved_tensors
        g_grid = g_luma = None
        if ctx.needs_input_grad[0]:
            w_luma = _hat(luma.reshape(-1) * (grid.shape[1] - 1), grid.shape[1]).T.view(-1, *luma.shape)
            per_cell = grad[:, None] * w_luma[None]  # [12, luma, H, W]
            g_grid = wy.T @ (per_cell @ wx)
        if ctx.needs_input_grad[1]:  # through the coordinate only: grid_sample then skips its scatter
            _, g_at = torch.ops.aten.grid_sampler_3d_backward(
                grad[None, :, None].contiguous(), grid[None], at, 0, 1, True, [False, True])  # bilinear, border
            g_luma = 2 * g_at[0, 0, ..., 2]
        return g_grid, g_luma, None, None, None


class _SliceCuda(torch.autograd.Function):
    """apply()'s luma, slice and transform in csrc/bilateral.cu, float32; the torch path above is
    its reference (tests/test_appearance.py)."""

    @staticmethod
    def forward(ctx, image, grid):
        from gsexp.render.cuda.build import load

        image, grid = image.float().contiguous(), grid.contiguous()
        ctx.save_for_backward(image, grid)
        return load().bilateral_slice_forward(image, grid)

    @staticmethod
    def backward(ctx, grad):
        from gsexp.render.cuda.build import load

        image, grid = ctx.saved_tensors
        return tuple(load().bilateral_slice_backward(grad.float().contiguous(), image, grid))


class _TotalVariationCuda(torch.autograd.Function):
    """regularization()'s total variation in one launch, its gradient made with it."""

    @staticmethod
    def forward(ctx, grid):
        from gsexp.render.cuda.build import load

        value, grad = load().bilateral_total_variation(grid.contiguous())
        ctx.save_for_backward(grad)
        return value

    @staticmethod
    def backward(ctx, g_value):
        (grad,) = ctx.saved_tensors
        return grad * g_value


def make_appearance(cfg, num_images: int, device):
    a = cfg.appearance
    if a.name == "none":
        return None
    if a.name == "affine":
        return AffineAppearance(num_images, device, lr=a.lr, reg=a.reg)
    if a.name == "bilateral_grid":
        return BilateralGridAppearance(num_images, device, lr=a.lr, reg=a.reg,
                                       grid_x=a.grid_x, grid_y=a.grid_y, grid_luma=a.grid_luma)
    raise ValueError(f"config key 'appearance.name': {a.name!r} is not one of {', '.join(APPEARANCES)}")
