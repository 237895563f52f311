"""Input validation shared by models, oracles, samplers and the checker.

Every helper raises ``ValueError`` (or ``TypeError`` for a wrong kind of
object) with a message that says what was wrong and how to fix it.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "as_token_array",
    "check_gamma",
    "check_probability_rows",
]

#: Tolerance on row sums for float64 probability tables.
ROW_SUM_ATOL = 1e-9


def check_probability_rows(probs, *, name: str = "probs", atol: float = ROW_SUM_ATOL) -> np.ndarray:
    """Return ``probs`` as float64 after checking that its last axis holds laws.

    Each row (last axis) must be finite, non-negative and sum to 1 within
    ``atol``. The error names the first offending row and its sum.
    """
    arr = np.asarray(probs, dtype=np.float64)
    if arr.ndim < 1 or arr.shape[-1] < 1:
        raise ValueError(f"{name} must have a non-empty last axis of outcomes; got shape {arr.shape}.")
    finite = np.isfinite(arr)
    if not finite.all():
        idx = np.argwhere(~finite)[0]
        raise ValueError(
            f"{name} has a non-finite entry {arr[tuple(idx)]!r} at index {tuple(int(i) for i in idx)}; "
            "every probability must be a finite number in [0, 1]."
        )
    if (arr < 0).any():
        idx = np.argwhere(arr < 0)[0]
        raise ValueError(
            f"{name} has a negative entry {arr[tuple(idx)]!r} at index {tuple(int(i) for i in idx)}; "
            "probabilities must be >= 0."
        )
    sums = arr.sum(axis=-1)
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        row = np.argwhere(bad)[0] if sums.ndim else ()
        row_t = tuple(int(i) for i in row)
        row_sum = float(sums[row_t]) if sums.ndim else float(sums)
        raise ValueError(
            f"{name} row {row_t} sums to {row_sum!r}, not 1 (tolerance {atol:g}); "
            "normalise each row, e.g. probs / probs.sum(-1, keepdims=True)."
        )
    return arr


def as_token_array(tokens, *, vocab_size: int, name: str = "tokens", allow_padding: bool = True,
                   ndim: int = 2) -> np.ndarray:
    """Return ``tokens`` as an int64 array of ``ndim`` dimensions with ids in range.

    Ids must lie in ``[0, vocab_size)``; ``-1`` is padding when ``allow_padding``.
    """
    arr = np.asarray(tokens)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise TypeError(f"{name} must be an integer array; got dtype {arr.dtype}. Cast with .astype(np.int64).")
    arr = arr.astype(np.int64, copy=False)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions; got shape {arr.shape}.")
    low = -1 if allow_padding else 0
    if arr.size:
        bad = (arr < low) | (arr >= vocab_size)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            allowed = f"[0, {vocab_size})" + (" or -1 for padding" if allow_padding else "")
            raise ValueError(f"{name}{list(idx)} = {int(arr[idx])} is out of range; token ids must be in {allowed}.")
    return arr


def check_gamma(gamma) -> int:
    """Return ``gamma`` (the number of drafted tokens per step) as an int >= 0."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)):
        raise TypeError(f"gamma must be an int >= 0; got {gamma!r}.")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0 (the number of drafted tokens per step); got {gamma}.")
    return int(gamma)
