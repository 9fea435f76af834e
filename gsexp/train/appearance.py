"""Per-photo appearance compensation (appearance=affine): each training photo gets a colour
transform, rendered colour -> M_i colour + b_i (M_i 3x3, b_i 3), learnt with the model from
identity, with reg x |[M_i - I, b_i]|^2 added to the loss so it explains only what the photos do
not share (exposure, white balance). The test views have no transform: they are evaluated as
rendered, and cc_psnr (gsexp.metrics) scores them after their best affine fit, as gsplat does."""
from __future__ import annotations

import torch

KINDS = ("none", "affine")


class AffineAppearance:
    def __init__(self, num_images: int, device, lr: float = 1e-3, reg: float = 0.01):
        self.delta = torch.nn.Parameter(torch.zeros(num_images, 3, 4, device=device))  # [M - I | b]
        self.optimizer = torch.optim.Adam([self.delta], lr=lr, eps=1e-15)
        self.reg = reg

    def apply(self, image: torch.Tensor, view: int) -> torch.Tensor:
        """[3, H, W] render -> the training photo `view`'s colours."""
        d = self.delta[view]
        return image + torch.einsum("ij,jhw->ihw", d[:, :3], image) + d[:, 3, None, None]

    def regularization(self, view: int) -> torch.Tensor:
        return self.reg * self.delta[view].square().sum()

    def step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def state_dict(self) -> dict:
        return {"delta": self.delta.detach().cpu(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            self.delta.copy_(state["delta"].to(self.delta.device))
        self.optimizer.load_state_dict(state["optimizer"])

    def summary(self) -> dict:
        """How far the photos' transforms went from identity (mean over photos)."""
        d = self.delta.detach()
        return {"appearance_mean_change": float(d.square().sum((1, 2)).sqrt().mean())}


def make_appearance(cfg, num_images: int, device):
    a = cfg.appearance
    return None if a.name == "none" else AffineAppearance(num_images, device, lr=a.lr, reg=a.reg)
