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

import numpy as np

__all__ = ["populated_empty"]

#: numpy's huge-page threshold: smaller arrays come from its allocator (malloc reuses their pages).
POPULATE_BYTES = 1 << 22


def populated_empty(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)``, with its pages mapped up front when large (Linux ``MAP_POPULATE``).

    The array owns an anonymous private mapping, released with the array. Where
    ``MAP_POPULATE`` is missing (not Linux) or the mapping fails, a plain ``np.empty``.
    """
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    flag = getattr(mmap, "MAP_POPULATE", None)
    if size < POPULATE_BYTES or flag is None:
        return np.empty(shape, dtype)
    try:
        buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flag)
    except (OSError, ValueError):
        return np.empty(shape, dtype)
    return np.frombuffer(buffer, dtype=dtype).reshape(shape)

