"""The laws a sampler sees after a cast to a low-precision dtype, as a numpy model."""

from __future__ import annotations

from .._torch_utils import cast_law_rows, resolve_dtype
from ._base import CausalModel

__all__ = ["CastLawModel"]


class CastLawModel(CausalModel):
    """Numpy model with the laws of ``base`` as a sampler sees them in ``dtype`` (cast, renormalised in float64)."""

    def __init__(self, base: CausalModel, dtype):
        self.base = base
        self.dtype = resolve_dtype(dtype)
        self.vocab_size = int(base.vocab_size)
        self.order = int(base.order)

    def probs_at(self, contexts):
        return cast_law_rows(self.base.probs_at(contexts), self.dtype)

    def __repr__(self):
        return f"CastLawModel({self.base!r}, {str(self.dtype).removeprefix('torch.')})"
