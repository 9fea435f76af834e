"""Compression variants, one module each; `make_compression` picks one by name.

none (base.py): nothing; base.py also gives the interface the training recipe calls.
prune: LightGaussian's global-significance pruning at `at_step`, then the rest of the run
fine-tunes. vq: the SH rest of the least significant `fraction` of Gaussians goes to a
significance-weighted k-means codebook (kmeans.py), everything but positions to fp16; at the
end, or at `vq_step`, after which the quantised rows stay fixed and the rest of the model
fine-tunes around them. prune_vq: both. mask: Compact-3DGS's learnable mask. The compressed
file's format is in format.py.
"""
from __future__ import annotations

import dataclasses

from gsexp.compress.base import NoCompression
from gsexp.compress.mask import Mask
from gsexp.compress.prune import Prune
from gsexp.compress.prune_vq import PruneVQ
from gsexp.compress.vq import VQ_CODE, VectorQuantize

COMPRESSIONS = {"none": NoCompression, "prune": Prune, "vq": VectorQuantize, "prune_vq": PruneVQ, "mask": Mask}


def make_compression(name: str, **options):
    if name not in COMPRESSIONS:
        raise ValueError(f"compress: unknown variant {name!r}; options: {', '.join(COMPRESSIONS)}")
    cls = COMPRESSIONS[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = set(options) - fields
    if unknown:
        raise ValueError(f"compress {name}: no option(s) {sorted(unknown)}; options: {sorted(fields)}")
    return cls(**options)


__all__ = ["COMPRESSIONS", "Mask", "NoCompression", "Prune", "PruneVQ", "VQ_CODE", "VectorQuantize",
           "make_compression"]
