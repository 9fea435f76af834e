"""The Gaussian container and its initialisation."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsexp.gaussians.sh import num_sh_bases, rgb_to_sh


@dataclass
class Gaussians:
    """N anisotropic 3D Gaussians with view-dependent colour.

    means [N,3]; log_scales [N,3]; quats [N,4] (w, x, y, z; need not be normalised);
    opacity_logits [N] (opacity = sigmoid); sh [N, (d+1)^2, 3] with d = sh_degree
    the degree stored (the renderer may use fewer bands).
    """

    means: torch.Tensor
    log_scales: torch.Tensor
    quats: torch.Tensor
    opacity_logits: torch.Tensor
    sh: torch.Tensor
    sh_degree: int = 0

    TENSORS = ("means", "log_scales", "quats", "opacity_logits", "sh")

    def __post_init__(self):
        if not 0 <= self.sh_degree <= 3:
            raise ValueError(f"Gaussians: sh_degree must be 0..3, got {self.sh_degree}")
        n = self.means.shape[0]
        expected = {
            "means": (n, 3), "log_scales": (n, 3), "quats": (n, 4), "opacity_logits": (n,),
            "sh": (n, num_sh_bases(self.sh_degree), 3),
        }
        for name, shape in expected.items():
            got = tuple(getattr(self, name).shape)
            if got != shape:
                raise ValueError(f"Gaussians.{name}: expected shape {shape}, got {got}")

    def __len__(self) -> int:
        return self.means.shape[0]

    @property
    def scales(self) -> torch.Tensor:
        return self.log_scales.exp()

    @property
    def opacities(self) -> torch.Tensor:
        return torch.sigmoid(self.opacity_logits)

    @property
    def device(self) -> torch.device:
        return self.means.device

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in self.TENSORS}

    def map(self, fn) -> "Gaussians":
        """A new Gaussians with `fn` applied to every tensor (e.g. `.to`, indexing)."""
        return Gaussians(**{k: fn(v) for k, v in self.tensors().items()}, sh_degree=self.sh_degree)

    def to(self, device) -> "Gaussians":
        return self.map(lambda t: t.to(device))

    def detach(self) -> "Gaussians":
        return self.map(lambda t: t.detach())

    def requires_grad_(self, flag: bool = True) -> "Gaussians":
        for t in self.tensors().values():
            t.requires_grad_(flag)
        return self

    def __getitem__(self, index) -> "Gaussians":
        return self.map(lambda t: t[index])

    def with_sh_degree(self, degree: int) -> "Gaussians":
        """The same Gaussians storing `degree` SH bands: higher bands cut, missing ones zero."""
        bases = num_sh_bases(degree)
        sh = self.sh[:, :bases]
        if sh.shape[1] < bases:
            sh = torch.cat([sh, sh.new_zeros(len(self), bases - sh.shape[1], 3)], 1)
        return Gaussians(self.means, self.log_scales, self.quats, self.opacity_logits, sh.contiguous(), degree)

    @classmethod
    def from_points(cls, points: torch.Tensor, colors: torch.Tensor | None = None, *,
                    sh_degree: int = 3, opacity: float = 0.1) -> "Gaussians":
        """3DGS init: isotropic, scale = mean distance to the 3 nearest neighbours."""
        points = points.float()
        n = points.shape[0]
        if n == 0:
            raise ValueError("Gaussians.from_points: no points given")
        if colors is None:
            colors = torch.full_like(points, 0.5)
        dist = knn_rms_distance(points, k=3).clamp_min(1e-7)
        sh = torch.zeros(n, num_sh_bases(sh_degree), 3)
        sh[:, 0] = rgb_to_sh(colors.float())
        quats = torch.zeros(n, 4)
        quats[:, 0] = 1.0
        logit = torch.logit(torch.tensor(opacity)).item()
        return cls(points.clone(), dist.log().unsqueeze(1).repeat(1, 3), quats,
                   torch.full((n,), logit), sh, sh_degree)

    @classmethod
    def random(cls, n: int, center, radius: float, *, sh_degree: int = 3, opacity: float = 0.1,
               generator: torch.Generator | None = None) -> "Gaussians":
        """3DGS's random init: uniform points in a cube of half-size `radius`, grey (3DGS draws
        SH-0 colours of at most 1/255, stored as 8 bits: 127/255 everywhere)."""
        center = torch.as_tensor(center, dtype=torch.float32)
        points = center + (torch.rand(n, 3, generator=generator) * 2 - 1) * radius
        return cls.from_points(points, torch.full((n, 3), 127 / 255), sh_degree=sh_degree, opacity=opacity)


def knn_rms_distance(points: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Root mean square distance of each point to its k nearest other points (3DGS's distCUDA2,
    the initial scale)."""
    from scipy.spatial import cKDTree  # a k-d tree: SfM clouds reach millions of points

    n = points.shape[0]
    if n <= 1:
        return torch.ones(n)
    k = min(k, n - 1)
    pts = points.detach().cpu().double().numpy()
    dist, _ = cKDTree(pts).query(pts, k=k + 1)  # the first neighbour is the point itself
    return torch.from_numpy((dist[:, 1:] ** 2).mean(1) ** 0.5).float()
