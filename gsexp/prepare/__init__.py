"""From photos to a scene: structure from motion and undistortion through pycolmap
(`python -m gsexp.prepare <images> <scene>`, or prepare() here)."""
from gsexp.prepare.inputs import PrepareError
from gsexp.prepare.pipeline import Summary, prepare
from gsexp.prepare.progress import Display
from gsexp.prepare.sfm import CAMERA_MODELS, MATCHERS, SfmOptions

__all__ = ["prepare", "SfmOptions", "Summary", "Display", "PrepareError", "CAMERA_MODELS", "MATCHERS"]
