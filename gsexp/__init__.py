"""gsexp: training and ablation framework for 3D Gaussian Splatting."""

__version__ = "0.1.0"
