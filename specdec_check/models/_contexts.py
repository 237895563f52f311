"""Context extraction for finite-order causal models (padding-aware)."""

from __future__ import annotations

import numpy as np

__all__ = ["context_indices", "last_context_indices"]


def context_indices(tokens: np.ndarray, *, order: int, vocab_size: int) -> np.ndarray:
    """Return int64 [B, T, order]: the last ``order`` real tokens up to each position.

    Position ``t`` sees the non-padding tokens of ``tokens[:, :t+1]`` (``-1`` is
    padding, on either side). Missing history is the start-of-sequence index
    ``vocab_size``. Entry ``[..., -1]`` is the most recent token.
    """
    batch, length = tokens.shape
    out = np.full((batch, length, order), vocab_size, dtype=np.int64)
    if order == 0 or length == 0 or batch == 0:
        return out
    real = tokens >= 0
    seen = np.cumsum(real, axis=1)  # number of real tokens in tokens[:, :t+1]
    # Real tokens first, in order (stable sort keeps their relative order).
    compact = np.take_along_axis(tokens, np.argsort(~real, axis=1, kind="stable"), axis=1)
    for back in range(order):  # back = 0 is the most recent token
        pos = seen - 1 - back
        ok = pos >= 0
        vals = np.take_along_axis(compact, np.clip(pos, 0, None), axis=1)
        out[:, :, order - 1 - back] = np.where(ok, vals, vocab_size)
    return out


def last_context_indices(tokens: np.ndarray, *, order: int, vocab_size: int) -> np.ndarray:
    """Return int64 [B, order]: the context after the whole of each row of ``tokens``."""
    batch, length = tokens.shape
    out = np.full((batch, order), vocab_size, dtype=np.int64)
    if order == 0 or length == 0 or batch == 0:
        return out
    real = tokens >= 0
    seen = real.sum(axis=1)
    compact = np.take_along_axis(tokens, np.argsort(~real, axis=1, kind="stable"), axis=1)
    for back in range(order):
        pos = seen - 1 - back
        ok = pos >= 0
        vals = compact[np.arange(batch), np.clip(pos, 0, None)]
        out[:, order - 1 - back] = np.where(ok, vals, vocab_size)
    return out
