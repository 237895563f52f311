"""One BLAS thread while a check runs, in the driver and in every shard: the report must not depend on
the BLAS library's thread count.

OpenBLAS splits a long dot product's reduction over its threads, so the rounding of e.g. the expected
acceptance (``probs @ repeats``) changed with the thread count: on many-rows in default mode the
report differed between 1 and 2 BLAS threads in the last bits, and a Dask worker (started with
``OPENBLAS_NUM_THREADS=1``) gave another report JSON than a 2-thread driver. The checker's dot products
are short; one thread costs nothing measurable and keeps the arithmetic the same everywhere (as the
torch backend's one intra-op thread on the CPU does for torch).
"""

from __future__ import annotations

import contextlib

__all__ = ["one_blas_thread"]


@contextlib.contextmanager
def one_blas_thread():
    """Limit every loaded BLAS library (OpenBLAS, MKL, BLIS) to one thread for the block, then restore
    the caller's settings (``threadpoolctl.threadpool_limits``)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
