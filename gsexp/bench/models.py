"""Gaussians from what a user points at: a PLY (INRIA or compressed), a trainer checkpoint,
or a run directory (its newest checkpoint)."""
from __future__ import annotations

from pathlib import Path

from gsexp.gaussians import Gaussians, load_ply, sh_degree_of, to_gaussians


def load_checkpoint_gaussians(path: Path) -> Gaussians:
    """The Gaussians of a trainer checkpoint (.pt) or of a run directory's newest one, detached (and,
    from a model.filter_3d run, filtered as it rendered them)."""
    from gsexp.train.checkpoint import latest_checkpoint, load_checkpoint

    path = Path(path)
    if path.is_dir():
        found = latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"no checkpoints in {path / 'checkpoints'}")
        path = found
    payload = load_checkpoint(path)
    params = payload.get("params") if isinstance(payload, dict) else None
    if not isinstance(params, dict) or "shN" not in params:
        raise ValueError(f"{path} is not a gsexp trainer checkpoint (no 'params' with 'shN')")
    try:  # the stored degree, whatever the run's schedule reached
        degree = sh_degree_of(1 + params["shN"].shape[1])
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    g = to_gaussians(params, degree).detach()
    if "filter_3d" in payload:  # model.filter_3d: the model as the run rendered it
        from gsexp.train.filter3d import filtered

        g = filtered(g, payload["filter_3d"])
    return g


def load_gaussians(path: Path) -> Gaussians:
    """A .ply file, else a checkpoint or run directory."""
    path = Path(path)
    return load_ply(path) if path.suffix.lower() == ".ply" else load_checkpoint_gaussians(path)
