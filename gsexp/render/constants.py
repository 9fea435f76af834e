"""Rasterizer constants: the one source of truth for the reference and the CUDA kernels.

csrc/config.h mirrors these values; tests check the two agree.
"""
import math

TILE_SIZE = 16          # pixels per tile side (one CUDA block per tile)
NEAR_PLANE = 0.2        # Gaussians with view-space z <= this are culled
COV2D_DILATION = 0.3    # added to the 2D covariance diagonal (low-pass filter)
FOV_CLAMP = 1.3         # the EWA Jacobian is evaluated at most 1.3 x tan(fov/2) off-axis
ALPHA_MAX = 0.99        # alpha is clamped here so T never reaches exactly 0
ALPHA_MIN = 1.0 / 255.0  # pairs with alpha below this are skipped
LOG_ALPHA_MIN = -math.log(255.0)  # EarlyCull threshold on beta = ln(o) + power
T_MIN = 1e-4            # a pixel stops once its transmittance would fall below this

BLENDS = ("vanilla", "gemm", "tcgs")
PRECISIONS = ("fp32", "tf32", "fp16")
# Which tiles get a Gaussian's entries: the 3-sigma square (vanilla), the exact box of the
# alpha = 1/255 ellipse, or only the tiles that ellipse touches (reference/intersect.py).
INTERSECTS = ("aabb", "snugbox", "accutile")
# Stage names in a render's stage_ms, the same for every backend ("backward" after one).
STAGES = ("preprocess", "duplicate", "sort", "ranges", "blend", "backward")
LEVEL_MARGIN = 1e-3     # the ellipse level grows by this share and spans by SPAN_MARGIN pixels,
SPAN_MARGIN = 1e-3      # so that rounding never cuts a pixel whose alpha reaches 1/255
