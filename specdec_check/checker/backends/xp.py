"""The few array operations the checker's per-call code needs, on numpy arrays or torch tensors.

Blocks, contract checks and tallies run the same code on the host (numpy) and, for backends
that count on the device, on the sampler's device (torch); the two libraries name these
operations differently, so the difference lives here and nowhere else.
"""

from __future__ import annotations

import numpy as np

__all__ = ["arange_like", "as_int64", "bincount", "concat", "flatnonzero", "is_host", "maximum", "to_numpy"]


def is_host(array) -> bool:
    """Whether ``array`` is a numpy array (else a torch tensor, possibly on a device)."""
    return isinstance(array, np.ndarray)


def flatnonzero(mask):
    """Indices of the True entries of a 1-d mask."""
    return np.flatnonzero(mask) if is_host(mask) else mask.nonzero()[:, 0]


def concat(arrays: list):
    """Arrays (all numpy or all torch on one device) joined along their first axis."""
    if is_host(arrays[0]):
        return np.concatenate(arrays)
    import torch

    return torch.cat(arrays)


def maximum(a, b):
    """Elementwise maximum."""
    return np.maximum(a, b) if is_host(a) else a.maximum(b)


def arange_like(array, n: int):
    """``arange(n)`` in the namespace and on the device of ``array``."""
    if is_host(array):
        return np.arange(n)
    import torch

    return torch.arange(n, device=array.device)


def as_int64(array):
    """``array`` as int64 (truncating floats toward zero)."""
    return array.astype(np.int64) if is_host(array) else array.long()


def bincount(values, minlength: int) -> np.ndarray:
    """Counts of non-negative integer ``values`` as a numpy array, counted where they live
    (for a device tensor only the counts cross to the host)."""
    if is_host(values):
        return np.bincount(values, minlength=minlength)
    return values.long().bincount(minlength=minlength).cpu().numpy()


def to_numpy(array) -> np.ndarray:
    """``array`` on the host as a numpy array (a device tensor is copied over; use for small arrays)."""
    return array if is_host(array) else array.cpu().numpy()
