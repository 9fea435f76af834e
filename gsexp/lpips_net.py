"""LPIPS v0.1 (Zhang et al. 2018) as plain torch modules: the ImageNet backbone's feature layers
(VGG16 or AlexNet, torchvision's layout and weights), then per tapped layer unit-normalised
features, their squared difference weighted by the authors' learned 1x1 layer, averaged over
the image, summed over the layers.

It computes what the `lpips` package's LPIPS(net, version="0.1") computes (tests/test_metrics.py
holds the two together), without importing that package or torchvision: their import pulls in
torch._dynamo, over a second of every training's evaluation (issue 39). The learned layers are
the package's own files, read from where it is installed.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

# torchvision's `features` for each backbone: ("C", in, out, kernel, stride, padding) | ("M",) a
# 3x3 / 2 max-pool | ("M2",) a 2x2 / 2 max-pool; a ReLU follows every conv. TAPS: the feature
# indices whose ReLU outputs LPIPS compares (the ends of the package's five slices).
LAYERS = {
    "alex": [("C", 3, 64, 11, 4, 2), ("M",), ("C", 64, 192, 5, 1, 2), ("M",), ("C", 192, 384, 3, 1, 1),
             ("C", 384, 256, 3, 1, 1), ("C", 256, 256, 3, 1, 1)],
    "vgg": [("C", 3, 64, 3, 1, 1), ("C", 64, 64, 3, 1, 1), ("M2",), ("C", 64, 128, 3, 1, 1),
            ("C", 128, 128, 3, 1, 1), ("M2",), ("C", 128, 256, 3, 1, 1), ("C", 256, 256, 3, 1, 1),
            ("C", 256, 256, 3, 1, 1), ("M2",), ("C", 256, 512, 3, 1, 1), ("C", 512, 512, 3, 1, 1),
            ("C", 512, 512, 3, 1, 1), ("M2",), ("C", 512, 512, 3, 1, 1), ("C", 512, 512, 3, 1, 1),
            ("C", 512, 512, 3, 1, 1)],
}
TAPS = {"alex": (1, 4, 7, 9, 11), "vgg": (3, 8, 15, 22, 29)}
SHIFT, SCALE = (-0.030, -0.088, -0.188), (0.458, 0.448, 0.450)  # v0.1's input scaling


def features(net: str) -> nn.Sequential:
    """The backbone's layers, indexed as torchvision's `features` (so its state dict loads)."""
    layers: list[nn.Module] = []
    for spec in LAYERS[net]:
        if spec[0] == "C":
            _, cin, cout, k, stride, pad = spec
            layers += [nn.Conv2d(cin, cout, k, stride, pad), nn.ReLU(inplace=True)]
        else:
            layers.append(nn.MaxPool2d(3, 2) if spec[0] == "M" else nn.MaxPool2d(2, 2))
    return nn.Sequential(*layers)


def package_weights(net: str) -> Path:
    """The `lpips` package's learned layers for `net` (v0.1), found without importing it."""
    spec = importlib.util.find_spec("lpips")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the lpips package is not installed: its v0.1 layers are LPIPS's weights "
                                "(pip install lpips)")
    return Path(list(spec.submodule_search_locations)[0]) / "weights" / "v0.1" / f"{net}.pth"


class LPIPS(nn.Module):
    """LPIPS v0.1 distance between [B, 3, H, W] images in [0, 1]: a [B] tensor."""

    def __init__(self, net: str, backbone: dict, linear: dict):
        super().__init__()
        self.net = net
        # Built on the meta device and given the weights: no random init, which would draw from
        # the global RNG and so change a training's next views after each evaluation.
        with torch.device("meta"):
            self.features = features(net)
            self.lins = nn.ModuleList(nn.Conv2d(self.features[i - 1].out_channels, 1, 1, bias=False)
                                      for i in TAPS[net])  # after each tap's conv
        self.features.load_state_dict(backbone, assign=True)
        self.lins.load_state_dict({f"{i}.weight": linear[f"lin{i}.model.1.weight"] for i in range(len(self.lins))},
                                  assign=True)
        self.register_buffer("shift", torch.tensor(SHIFT)[None, :, None, None])
        self.register_buffer("scale", torch.tensor(SCALE)[None, :, None, None])

    def _taps(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = ((2 * x - 1) - self.shift) / self.scale
        out, taps = [], set(TAPS[self.net])
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in taps:
                out.append(x / (x.square().sum(1, keepdim=True).sqrt() + 1e-10))
            if i == max(taps):
                break
        return out

    def forward(self, img: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        total = 0
        for lin, a, b in zip(self.lins, self._taps(img), self._taps(ref)):
            total = total + lin((a - b) ** 2).mean((2, 3))
        return total[:, 0]
