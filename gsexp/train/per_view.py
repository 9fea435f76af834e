"""What a training view owns beside the model (appearance=affine or bilateral_grid, pose_opt): a
row of parameters per training view, from zero, with its own Adam and a pull toward zero added to
the loss (the grid's is its total variation instead)."""
from __future__ import annotations

import torch

from gsexp.train.optim import Adam


class PerView:
    def __init__(self, shape: tuple[int, ...], device, lr: float, reg: float, eps: float = 1e-8):
        self.delta = torch.nn.Parameter(torch.zeros(shape, device=device))
        self.optimizer = Adam([self.delta], lr=lr, eps=eps)
        self.reg = reg

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
