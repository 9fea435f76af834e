"""Per-photo appearance compensation (appearance=affine): each training photo gets a colour
transform, rendered colour -> M_i colour + b_i (M_i 3x3, b_i 3), learnt with the model from
identity, with reg x |[M_i - I, b_i]|^2 added to the loss so it explains only what the photos do
not share (exposure, white balance). The test views have no transform: they are evaluated as
rendered, and cc_psnr (gsexp.metrics) scores them after their best affine fit, as gsplat does."""
from __future__ import annotations

import torch

from gsexp.train.per_view import PerView


class AffineAppearance(PerView):
    def __init__(self, num_images: int, device, lr: float = 1e-3, reg: float = 0.01):
        super().__init__((num_images, 3, 4), device, lr, reg, eps=1e-15)  # [M - I | b] per photo

    def apply(self, image: torch.Tensor, view: int) -> torch.Tensor:
        """[3, H, W] render -> the training photo `view`'s colours."""
        d = self.delta[view]
        return image + torch.einsum("ij,jhw->ihw", d[:, :3], image) + d[:, 3, None, None]

    def summary(self) -> dict:
        """How far the photos' transforms went from identity (mean over photos)."""
        d = self.delta.detach()
        return {"appearance_mean_change": float(d.square().sum((1, 2)).sqrt().mean())}


def make_appearance(cfg, num_images: int, device):
    a = cfg.appearance
    return None if a.name == "none" else AffineAppearance(num_images, device, lr=a.lr, reg=a.reg)
