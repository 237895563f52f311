"""A compact integer encoding of the strings one speculative step can emit.

A step emits between 1 and ``gamma + 1`` tokens. A string ``s`` of length ``m``
over ``V`` tokens is encoded as ``offset(m) + sum_j s_j V^(m-1-j)`` with
``offset(m) = V + V^2 + ... + V^(m-1)``, so lengths never collide and the codes
of all strings of length 1..gamma+1 fill ``[0, num_step_outcomes(V, gamma))``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["decode_emitted", "encode_emitted", "num_step_outcomes"]

#: Largest outcome space the enumerating oracles build (about 80 MB of float64).
MAX_OUTCOMES = 10_000_000


def num_step_outcomes(vocab_size: int, gamma: int) -> int:
    """Number of strings of length 1..gamma+1 over ``vocab_size`` tokens."""
    return int(sum(vocab_size**m for m in range(1, gamma + 2)))


def _offsets(vocab_size: int, gamma: int) -> np.ndarray:
    sizes = [vocab_size**m for m in range(1, gamma + 2)]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def encode_emitted(tokens, vocab_size: int) -> np.ndarray:
    """Encode rows of emitted tokens (int [B, gamma+1], ``-1`` padding after the end) as int64 [B].

    Rows must hold between 1 and gamma+1 tokens followed only by ``-1``.
    """
    arr = np.asarray(tokens, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"emitted tokens must have shape [B, gamma+1]; got {arr.shape}.")
    gamma = arr.shape[1] - 1
    if num_step_outcomes(vocab_size, gamma) >= 2**62:
        raise ValueError("the outcome space is too large to encode in int64; use per-position tests instead.")
    lengths = (arr >= 0).sum(axis=1)
    well_formed = np.all((arr >= 0) == (np.arange(arr.shape[1]) < lengths[:, None]), axis=1)
    well_formed &= (lengths >= 1) & np.all(arr >= -1, axis=1) & np.all(arr < vocab_size, axis=1)
    if not well_formed.all():
        row = int(np.argwhere(~well_formed)[0, 0])
        raise ValueError(
            f"row {row} {arr[row].tolist()} is not 1..gamma+1 token ids in [0, {vocab_size}) followed by -1 padding."
        )
    code = np.zeros(arr.shape[0], dtype=np.int64)
    for j in range(arr.shape[1]):
        live = j < lengths
        code = np.where(live, code * vocab_size + np.maximum(arr[:, j], 0), code)
    return _offsets(vocab_size, gamma)[lengths - 1] + code


def decode_emitted(codes, vocab_size: int, gamma: int) -> np.ndarray:
    """Inverse of :func:`encode_emitted`: int [N] codes to int [N, gamma+1] with ``-1`` padding."""
    codes = np.asarray(codes, dtype=np.int64)
    offsets = _offsets(vocab_size, gamma)
    lengths = np.searchsorted(offsets, codes, side="right")
    rest = codes - offsets[lengths - 1]
    out = np.full((codes.shape[0], gamma + 1), -1, dtype=np.int64)
    for j in range(gamma, -1, -1):
        live = j < lengths
        out[:, j] = np.where(live, rest % vocab_size, -1)
        rest = np.where(live, rest // vocab_size, rest)
    return out
