"""Export a model for viewers: python -m gsexp.export MODEL --format FORMAT --out FILE

MODEL: a run directory (its newest checkpoint), a trainer checkpoint (.pt), a PLY (INRIA or
PlayCanvas compressed) or a .splat file.

Formats:
  ply             the INRIA 3DGS PLY (float32, every SH band; bit-exact round trip)
  compressed-ply  the PlayCanvas/SuperSplat compressed PLY: chunks of 256 Gaussians with
                  min/max boxes, 16 bytes per Gaussian + 8-bit SH rest over the format's fixed
                  [-4, 4), its bands stored up to the degree that loses least (smaller than the
                  8-bit step, a band is left out) (gsexp/gaussians/compressed.py)
  splat           the antimatter15/splat web layout: 32 bytes per Gaussian, SH rest dropped
                  (gsexp/gaussians/splat.py)
Without --format, the format follows --out: *.compressed.ply, *.splat or *.ply; with both, they
must agree (--format splat --out x.ply is refused: a viewer would read it as a broken PLY).

A user error (missing file, not a model, bad option) prints one line and exits with 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gsexp.cli import Parser
from gsexp.errors import USER_ERRORS, UserError, one_line
from gsexp.gaussians import Gaussians

FORMATS = ("ply", "compressed-ply", "splat")
SUFFIXES = {"ply": ".ply", "compressed-ply": ".compressed.ply", "splat": ".splat"}
PROG = "python -m gsexp.export"


def check_model_path(path) -> Path:
    """`path` if it can be a model (it exists, and a file has a model's suffix), else UserError."""
    path = Path(path)
    accepted = "give a run directory, a checkpoint .pt, a .ply or a .splat file"
    if not path.exists():
        raise UserError(f"model {path} does not exist (relative paths are from {Path.cwd()}); {accepted}")
    suffix = path.suffix.lower()
    if path.is_file() and suffix not in (".ply", ".pt", ".splat"):
        raise UserError(f"model {path}: unknown kind of file '{suffix or path.name}'; {accepted}")
    return path


def load_model(path) -> Gaussians:
    """Gaussians from a run directory, a checkpoint (.pt), a PLY or a .splat file; a path that is
    none of these raises UserError saying what is accepted."""
    from gsexp.bench.models import load_gaussians
    from gsexp.gaussians.splat import read_splat

    path = check_model_path(path)
    if path.suffix.lower() == ".splat":
        return read_splat(path)
    try:
        return load_gaussians(path)
    except FileNotFoundError as err:  # a folder without checkpoints
        raise UserError(f"model {path}: {one_line(err)}; is it a run directory (train.py's output)?") from None
    except (KeyError, RuntimeError, EOFError) as err:
        raise UserError(f"model {path} cannot be read ({type(err).__name__}: {one_line(err)})") from None


def format_of(out: Path, given: str | None) -> str:
    """--format, else the one --out's name implies; both given must agree (a .splat named .ply
    would be read back as a broken PLY)."""
    named = format_named(out)
    if given is not None and named is not None and given != named:
        raise UserError(f"--format {given} and --out {out} disagree: that name means {named}; name the file "
                        f"*{SUFFIXES[given]}, or drop --format")
    if given is not None or named is not None:
        return given or named
    raise UserError(f"--out {out}: cannot tell the format from the name; pass --format "
                    f"{'|'.join(FORMATS)} (or name it *.ply, *.compressed.ply or *.splat)")


def format_named(out: Path) -> str | None:
    name = out.name.lower()
    # the longest suffix first: *.compressed.ply also ends with .ply
    return next((fmt for fmt, suffix in sorted(SUFFIXES.items(), key=lambda kv: -len(kv[1]))
                 if name.endswith(suffix)), None)


def export(g: Gaussians, out, fmt: str) -> Path:
    """Write `g` to `out` in format `fmt` (one of FORMATS); returns the path."""
    from gsexp.gaussians import save_ply
    from gsexp.gaussians.compressed import save_compressed_ply
    from gsexp.gaussians.splat import write_splat

    writers = {"ply": save_ply, "compressed-ply": save_compressed_ply, "splat": write_splat}
    if fmt not in writers:
        raise UserError(f"--format {fmt}: unknown format; choose one of {', '.join(FORMATS)}")
    out = Path(out)
    if out.is_dir():
        raise UserError(f"--out {out} is a directory; give a file name, e.g. {out / ('model.' + fmt.split('-')[0])}")
    writers[fmt](g, out)
    return out


def sh_note(g: Gaussians, fmt: str) -> str:
    """What the format did to the SH rest, for the summary line."""
    if fmt == "splat" and g.sh_degree:
        return "; SH rest dropped: .splat has none"
    if fmt == "compressed-ply" and g.sh_degree:
        from gsexp.gaussians.compressed import useful_sh_degree

        kept = useful_sh_degree(g)
        if kept < g.sh_degree:
            return f"; {kept} stored: the higher bands are smaller than the format's 8-bit step"
    return ""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path, help="run directory, checkpoint .pt, .ply or .splat")
    p.add_argument("--format", choices=FORMATS, help="output format (default: from --out's name)")
    p.add_argument("--out", type=Path, required=True, help="the file to write")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        fmt = format_of(args.out, args.format)
        g = load_model(args.model)
        out = export(g, args.out, fmt)
    except USER_ERRORS as err:
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        return 2
    size = out.stat().st_size
    print(f"wrote {out}: {fmt}, {len(g):,} Gaussians (SH degree {g.sh_degree}{sh_note(g, fmt)}), "
          f"{size / 2**20:.2f} MiB, {size / max(len(g), 1):.1f} bytes per Gaussian")
    return 0


if __name__ == "__main__":
    sys.exit(main())
