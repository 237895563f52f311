"""Input arrays whose pages are mapped in one system call, without huge-page advice.

A fresh 100 MB numpy array is mapped page by page on first touch: on the 2-core development
VM each 4 KiB fault costs about 1.5 us, so faulting dominates the cost of gathering a call's
[B, gamma+1, V] probability rows from a law table (measured at 10^5 rows, V = 32, gamma = 4:
122 ms gathering into fresh arrays, 88 ms into arrays mapped with ``MAP_POPULATE``). numpy
advises huge pages for arrays of 4 MiB and more, and their first touch stalled for up to
0.5 s on the same machine (the host backing fresh 2 MiB pages), so arrays from 4 MiB get a
mapping of their own, which gets no such advice. Smaller arrays come from numpy's allocator,
whose freed pages malloc reuses without faults (the V = 1,000 and V = 32,000 scenarios of the
default battery: 2.8-3.1 s with this split, 3.3-3.6 s when arrays from 1 MiB are mapped).
"""

from __future__ import annotations

import mmap
import threading
import weakref

import numpy as np

__all__ = ["populated_empty", "release_mappings"]

#: numpy's huge-page threshold: smaller arrays come from its allocator (malloc reuses their pages).
POPULATE_BYTES = 1 << 22
#: A mapping whose array died is kept for the next array of about its size, up to this many bytes in all:
#: a scenario of large calls draws arrays of the same few sizes again and again, and a reused mapping skips
#: mapping and zeroing its pages again (14 ms per 82 MB draw at V = 32,000: 0.8 s of the default battery's
#: CPU). Two draws of the largest default scenario fit; :func:`release_mappings` drops them all when a
#: scenario ends, so no later scenario or caller holds them.
REUSE_BYTES = 192 << 20
#: A kept mapping serves an array of at least 1 / REUSE_SLACK of its size (a small array does not pin a large one).
REUSE_SLACK = 2

_kept: list = []  # mappings whose arrays died, oldest first
_lock = threading.Lock()


def populated_empty(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)``, with its pages mapped up front when large (Linux ``MAP_POPULATE``).

    The array owns an anonymous private mapping, kept for reuse when the array dies (``REUSE_BYTES``).
    Where ``MAP_POPULATE`` is missing (not Linux) or the mapping fails, a plain ``np.empty``.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    size = count * dtype.itemsize
    flag = getattr(mmap, "MAP_POPULATE", None)
    if size < POPULATE_BYTES or flag is None:
        return np.empty(shape, dtype)
    buffer = _reused(size)
    if buffer is None:
        try:
            buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flag)
        except (OSError, ValueError):
            return np.empty(shape, dtype)
    flat = np.frombuffer(buffer, dtype=dtype, count=count)
    weakref.finalize(flat, _keep, buffer)  # every view of the array holds ``flat``: it dies last
    return flat.reshape(shape)


def _reused(size: int):
    """The smallest kept mapping that fits ``size`` bytes without pinning much more, taken out; or None."""
    with _lock:
        fits = [m for m in _kept if size <= len(m) <= REUSE_SLACK * size]
        if not fits:
            return None
        best = min(fits, key=len)
        _kept.remove(best)
        return best


def _keep(buffer) -> None:
    with _lock:
        _kept.append(buffer)
        while sum(len(m) for m in _kept) > REUSE_BYTES:
            _kept.pop(0).close()


def release_mappings() -> None:
    """Unmap every kept mapping (the arrays that used them are gone)."""
    with _lock:
        while _kept:
            _kept.pop().close()
