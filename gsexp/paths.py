"""Where the team's shared data lives: $GSEXP_SHARED, else ../shared beside the repo."""
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    return Path(os.environ.get("GSEXP_SHARED", REPO_ROOT.parent / "shared"))
