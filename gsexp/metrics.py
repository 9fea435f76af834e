"""Image metrics: PSNR, SSIM and LPIPS on float RGB images in [0, 1].

Every metric takes ``img`` and ``ref`` of shape [3,H,W] or [B,3,H,W] and returns a
0-dim tensor: the value for a single image, or the mean over the batch (PSNR is
computed per image, then averaged, as 3DGS papers report it).

LPIPS never downloads anything: the ImageNet backbone comes from a local file (see
``lpips``) and the linear layers from the ``lpips`` package's files (gsexp/lpips_net.py runs the
network without importing that package or torchvision).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn.functional as F

from gsexp.paths import shared_dir


# net name -> (file in a weights dir, torchvision's checkpoint name in the hub cache)
LPIPS_BACKBONES = {
    "vgg": ("vgg16_features_imagenet.pth", "vgg16-397923af.pth"),
    "alex": ("alexnet_features_imagenet.pth", "alexnet-owt-7be5be79.pth"),
}

_lpips_cache: dict[tuple[str, str, str], torch.nn.Module] = {}


def _as_batch(img: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if img.shape != ref.shape:
        raise ValueError(f"img and ref shapes differ: {tuple(img.shape)} vs {tuple(ref.shape)}")
    if img.dim() not in (3, 4) or img.shape[-3] != 3:
        raise ValueError(f"expected images of shape [3,H,W] or [B,3,H,W], got {tuple(img.shape)}")
    if img.dim() == 3:
        img, ref = img[None], ref[None]
    return img, ref


def psnr(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """PSNR in dB (peak 1.0), mean over the batch; inf for identical images."""
    img, ref = _as_batch(img, ref)
    mse = (img - ref).square().mean(dim=(1, 2, 3))
    return (-10 * torch.log10(mse)).mean()


def color_corrected(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """The [3, H, W] render under its best affine colour map to `ref` (least squares over the
    pixels, a 3x3 matrix and an offset), clamped to [0, 1]: what cc_psnr scores, so an exposure
    or white-balance difference between the test photo and the model does not count."""
    x = img.reshape(3, -1).T.double()
    a = torch.cat([x, torch.ones_like(x[:, :1])], 1)
    gram = a.T @ a  # normal equations, 4x4: on any device, and a flat render (rank 1) stays solvable
    gram += 1e-9 * gram.diagonal().sum() * torch.eye(4, dtype=gram.dtype, device=gram.device)
    fit = torch.linalg.solve(gram, a.T @ ref.reshape(3, -1).T.double())
    return (a @ fit).T.reshape(img.shape).clamp(0, 1).to(img.dtype)


def cc_psnr(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """PSNR after the render's best affine colour fit to `ref` (gsplat's cc_psnr, affine)."""
    return psnr(color_corrected(img, ref), ref)


def _window(channels: int, dtype: torch.dtype, device: torch.device, size: int = 11, sigma: float = 1.5):
    """The separable Gaussian window as a depthwise conv2d weight [channels, 1, size, size]."""
    x = torch.arange((1 - size) / 2, (1 + size) / 2, 1, dtype=dtype, device=device)
    g = torch.exp(-((x / sigma) ** 2) / 2)
    g = (g / g.sum())[None]
    return (g.T @ g).expand(channels, 1, size, size)


def ssim(img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """SSIM (11x11 Gaussian window, sigma 1.5, data range 1.0, reflect padding, every pixel
    averaged), mean over the batch: torchmetrics' structural_similarity_index_measure with
    data_range=1.0 (tests/test_metrics.py holds the two together), without importing it, which
    takes over a second of a training's start-up."""
    img, ref = _as_batch(img, ref)
    ref = ref.to(img.dtype)
    c1, c2 = 0.01**2, 0.03**2
    pad = (5, 5, 5, 5)
    x, y = F.pad(img, pad, mode="reflect"), F.pad(ref, pad, mode="reflect")
    stats = F.conv2d(torch.cat((x, y, x * x, y * y, x * y)), _window(img.shape[1], img.dtype, img.device),
                     groups=img.shape[1])
    mu_x, mu_y, xx, yy, xy = stats.split(img.shape[0])
    mu_xx, mu_yy, mu_xy = mu_x.square(), mu_y.square(), mu_x * mu_y
    var_x, var_y = (xx - mu_xx).clamp(min=0), (yy - mu_yy).clamp(min=0)
    cov = xy - mu_xy
    value = (2 * mu_xy + c1) * (2 * cov + c2) / ((mu_xx + mu_yy + c1) * (var_x + var_y + c2))
    return value.reshape(img.shape[0], -1).mean(-1).mean()


def _weight_candidates(net: str) -> list[Path]:
    """Backbone weight files to try, in order (the ``weights`` argument aside)."""
    own_name, torchvision_name = LPIPS_BACKBONES[net]
    candidates = []
    if "GSEXP_LPIPS_WEIGHTS" in os.environ:
        candidates.append(Path(os.environ["GSEXP_LPIPS_WEIGHTS"]) / own_name)
    candidates.append(shared_dir() / "weights" / own_name)
    candidates.append(Path(torch.hub.get_dir()) / "checkpoints" / torchvision_name)
    return candidates


def find_lpips_weights(net: str, weights: str | os.PathLike | None = None) -> Path:
    """Resolve the backbone weight file for ``net``; raise FileNotFoundError if none exists."""
    if weights is not None:
        path = Path(weights)
        if not path.is_file():
            raise FileNotFoundError(f"LPIPS backbone weights not found: {path}")
        return path
    candidates = _weight_candidates(net)
    for path in candidates:
        if path.is_file():
            return path
    tried = "\n  ".join(str(p) for p in candidates)
    own_name, torchvision_name = LPIPS_BACKBONES[net]
    raise FileNotFoundError(
        f"no ImageNet backbone weights for LPIPS net={net!r} (gsexp never downloads them). "
        f"Tried:\n  {tried}\n"
        f"Provide them by one of: pass weights=<path to {own_name} or {torchvision_name}>; "
        f"set GSEXP_LPIPS_WEIGHTS to a directory holding {own_name}; "
        f"or put torchvision's {torchvision_name} in {Path(torch.hub.get_dir()) / 'checkpoints'}."
    )


def _build_lpips(net: str, weights_path: Path) -> torch.nn.Module:
    from gsexp.lpips_net import LPIPS, features, package_weights

    # Accepts the features-only dict or a full torchvision checkpoint (classifier ignored).
    state = torch.load(weights_path, map_location="cpu", weights_only=True)
    state = {k[len("features."):]: v for k, v in state.items() if k.startswith("features.")}
    backbone = {}
    with torch.device("meta"):  # only the names: no random init (it would draw from the RNG)
        names = list(features(net).state_dict())
    for name in names:
        if name not in state:
            raise KeyError(f"{weights_path} lacks features.{name} for LPIPS net={net!r}")
        backbone[name] = state[name]
    linear = torch.load(package_weights(net), map_location="cpu", weights_only=True)
    model = LPIPS(net, backbone, linear)
    model.eval()
    model.requires_grad_(False)
    return model


def lpips(
    img: torch.Tensor,
    ref: torch.Tensor,
    net: str = "vgg",
    weights: str | os.PathLike | None = None,
) -> torch.Tensor:
    """LPIPS v0.1 distance (lower is closer), mean over the batch.

    ``net`` is "vgg" or "alex". The ImageNet backbone is read from, in order: ``weights``
    (a features-only or full torchvision state dict), $GSEXP_LPIPS_WEIGHTS/<file>,
    <shared>/weights/<file>, then torchvision's checkpoint in the torch hub cache.
    Gradients flow to the images (usable as a loss), not to the network.
    """
    if net not in LPIPS_BACKBONES:
        raise ValueError(f"unknown LPIPS net {net!r}; choose one of {sorted(LPIPS_BACKBONES)}")
    img, ref = _as_batch(img, ref)
    return _lpips_model(net, img.device, weights)(img.float(), ref.float()).mean()


def _lpips_model(net: str, device, weights: str | os.PathLike | None = None) -> torch.nn.Module:
    """The network for `net` on `device`, built once per backbone file and device."""
    path = find_lpips_weights(net, weights).resolve()
    key = (net, str(path), str(device))
    if key not in _lpips_cache:
        _lpips_cache[key] = _build_lpips(net, path).to(device)
    return _lpips_cache[key]
