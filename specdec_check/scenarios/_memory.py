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

import contextlib
import mmap
import threading
import weakref

import numpy as np

__all__ = ["populated_empty", "release_mappings", "reusing_mappings"]

#: numpy's huge-page threshold: smaller arrays come from its allocator (malloc reuses their pages).
POPULATE_BYTES = 1 << 22
#: Inside :func:`reusing_mappings` (a scenario's run), a mapping whose array died is kept for the next array of
#: about its size, up to this many bytes in all: a scenario of large calls draws arrays of the same few sizes again
#: and again, and a reused mapping skips mapping and zeroing its pages again (14 ms per 82 MB draw at V = 32,000:
#: 0.8 s of the default battery's CPU). Two draws of the largest default scenario fit; a larger mapping is never
#: kept, and every kept one is unmapped when the run ends. Outside a run nothing is kept.
REUSE_BYTES = 192 << 20
#: A kept mapping serves an array of at least 1 / REUSE_SLACK of its size (a small array does not pin a large one);
#: an array no kept mapping serves unmaps those over REUSE_SLACK times its size. With 2, the within-call pairs' draws
#: of half a call at V = 32,000 (39 MiB) took the law loop's two mappings (77 MiB) at the bound.
REUSE_SLACK = 1.5

_kept: list = []  # mappings whose arrays died, oldest first (appended by finalizers, without the lock)
_lock = threading.Lock()  # taken by ordinary code only, never by a finalizer (a collection may run one anywhere)
_runs = [0]  # how many reusing_mappings() blocks are open


def populated_empty(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)``, with its pages mapped up front when large (Linux ``MAP_POPULATE``).

    The array owns an anonymous private mapping, kept for reuse when the array dies inside a run
    (:func:`reusing_mappings`). Where ``MAP_POPULATE`` is missing (not Linux) or the mapping fails, a plain
    ``np.empty``.
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
    # every view of the array holds ``flat``: it dies last; at exit nothing is worth keeping
    weakref.finalize(flat, _keep, buffer).atexit = False
    return flat.reshape(shape)


def _keep(buffer) -> None:
    """A finalizer: the array died (the mapping is still exported until numpy lets go of it, so it is only listed
    here; closing or trimming happens in ordinary code). No lock: a garbage collection may run this anywhere."""
    if _runs[0] and len(buffer) <= REUSE_BYTES:
        _kept.append(buffer)


def _close(buffer) -> None:
    with contextlib.suppress(BufferError, ValueError):  # still exported: it is unmapped when collected instead
        buffer.close()


def _reused(size: int):
    """The smallest kept mapping that fits ``size`` bytes without pinning much more, taken out; or None. The
    oldest kept mappings past ``REUSE_BYTES`` are unmapped first."""
    with _lock:
        while len(_kept) > 1 and sum(len(m) for m in list(_kept)) > REUSE_BYTES:
            _close(_kept.pop(0))
        fits = [m for m in list(_kept) if size <= len(m) <= REUSE_SLACK * size]
        if not fits:
            # The run has moved on to arrays of another size: the kept mappings too large for this one are let go
            # now rather than left resident beside it (the within-call pairs at V = 32,000 drew 39 MiB windows
            # beside the law loop's 77 MiB of kept mappings).
            for m in [m for m in list(_kept) if len(m) > REUSE_SLACK * size]:
                _kept.remove(m)
                _close(m)
            return None
        best = min(fits, key=len)
        _kept.remove(best)
        return best


def release_mappings() -> None:
    """Unmap every kept mapping (the arrays that used them are gone), and give the C heap's free pages back
    (:func:`return_free_memory`)."""
    with _lock:
        while _kept:
            _close(_kept.pop())
    return_free_memory()


_trim = []  # [glibc's malloc_trim] once looked up ([None] where there is none)


def return_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim(0)``; nothing elsewhere). Arrays under
    glibc's mmap threshold (which rises to the size of the largest mapped block freed, 32 MB at most) come from the
    heap, and their freed pages stay resident while anything above them lives: the zero-coin probe's call at
    V = 32,000 left 12 MB of them or not depending on the order of earlier frees, and with them beside the law loop's
    draws the default battery's peak was 289 or 301 MB from one run to the next (issue 31). Called between the phases
    of a scenario: 264 calls, 27 ms in all, in a default verifier run."""
    if not _trim:
        try:
            import ctypes

            trim = ctypes.CDLL("libc.so.6").malloc_trim
            trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):
            trim = None
        _trim.append(trim)
    if _trim[0] is not None:
        _trim[0](0)


@contextlib.contextmanager
def reusing_mappings():
    """Keep the mappings of large arrays that die inside the block for reuse; unmap them all when it ends."""
    with _lock:
        _runs[0] += 1
    try:
        yield
    finally:
        with _lock:
            _runs[0] -= 1
            last = not _runs[0]
        if last:
            release_mappings()
