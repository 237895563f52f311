"""Shared input validation (the ``_<name>_iv`` helpers of the public functions)."""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["_alpha_iv", "_probs_iv", "_counts_iv", "_rng_iv", "_positive_int_iv"]

PROBS_RTOL = 1e-9


def _alpha_iv(alpha, name="alpha"):
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a real number in (0, 1); got {alpha!r}.") from None
    if not (0.0 < a < 1.0) or not np.isfinite(a):
        raise ValueError(f"`{name}` must lie strictly between 0 and 1; got {alpha!r}.")
    return a


def _probs_iv(probs, name="probs", *, ndim=1, normalize=True):
    try:
        raw = np.asarray(probs)
        arr = raw.astype(np.float64, copy=False)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be an array of real probabilities.") from None
    # float64 input: 1e-9; lower-precision input (e.g. float32 softmax): 100 ulp of that dtype
    low = raw.dtype in (np.float32, np.float16)
    rtol = max(PROBS_RTOL, 100 * float(np.finfo(raw.dtype).eps)) if low else PROBS_RTOL
    if arr.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-dimensional; got shape {arr.shape}.")
    if arr.shape[-1] < 1 or arr.size == 0:
        raise ValueError(f"`{name}` must not be empty.")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0].tolist()
        raise ValueError(f"`{name}` must be finite; entry {bad} is {arr[tuple(bad)]}.")
    if np.any(arr < 0):
        bad = np.argwhere(arr < 0)[0].tolist()
        raise ValueError(
            f"`{name}` must be nonnegative; entry {bad} is {arr[tuple(bad)]!r}. "
            "Clip tiny negative round-off to 0 and renormalise before calling."
        )
    sums = arr.sum(axis=-1)
    dev = np.abs(sums - 1.0)
    if np.any(dev > rtol):
        i = int(np.argmax(dev))
        s = float(np.ravel(sums)[i])
        where = "" if ndim == 1 else f" (row {i})"
        raise ValueError(
            f"`{name}` must sum to 1 within a relative tolerance of {rtol:g}; "
            f"the sum{where} is {s!r}. Renormalise in float64 (probs / probs.sum())."
        )
    if not normalize:
        return arr
    return arr / sums[..., None] if ndim > 1 else arr / sums


def _counts_iv(counts, k=None, name="counts"):
    arr = np.asarray(counts)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer)
                                   or np.issubdtype(arr.dtype, np.floating)
                                   or arr.dtype == np.bool_):
        raise ValueError(f"`{name}` must be an array of nonnegative integers; got dtype {arr.dtype}.")
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-dimensional; got shape {arr.shape}.")
    if k is not None and arr.shape[0] != k:
        raise ValueError(
            f"`{name}` has {arr.shape[0]} entries but `probs` has {k}; "
            "they must describe the same outcomes (same length)."
        )
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"`{name}` must be finite integers.")
        if np.any(arr != np.round(arr)):
            i = int(np.argmax(arr != np.round(arr)))
            raise ValueError(f"`{name}` must be integers; entry {i} is {arr[i]!r}.")
    if np.any(arr < 0):
        i = int(np.argmax(arr < 0))
        raise ValueError(f"`{name}` must be nonnegative; entry {i} is {arr[i]!r}.")
    if np.issubdtype(arr.dtype, np.floating) and arr.size and arr.max() > 2.0**53:
        raise ValueError(f"`{name}` entries exceed 2**53 and cannot be represented exactly.")
    return arr.astype(np.int64)


def _rng_iv(rng):
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise ValueError(
        "`rng` must be a numpy.random.Generator or an int seed "
        f"(e.g. np.random.default_rng(1234)); got {type(rng).__name__}. "
        "Global random state is never used."
    )


def _positive_int_iv(x, name, *, minimum=1):
    if isinstance(x, bool) or not isinstance(x, (numbers.Integral, np.integer)):
        if isinstance(x, (float, np.floating)) and float(x).is_integer():
            x = int(x)
        else:
            raise ValueError(f"`{name}` must be an integer >= {minimum}; got {x!r}.")
    x = int(x)
    if x < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {x}.")
    return x
