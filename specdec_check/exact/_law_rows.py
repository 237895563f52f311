"""Rows of laws addressed by id: a base table held by reference, then rows added in a growing buffer.

The tree laws keep every slot's final law as an id into such rows
(:class:`~specdec_check.exact._tree_kernels.TreeLaws`): one row per slot for dense inputs, one
row per distinct residual for keyed inputs (:mod:`specdec_check.exact._tree_keyed`). Reads are
gathers (a value, an exclusive cumulative sum, a row's total or its sum of squares at given ids),
so the checker's randomized PITs never build ``[B, N+1, V]`` arrays; the cumulative rows and the
squares of added rows are computed when first read (most intermediate residuals never are).
"""

from __future__ import annotations

import numpy as np

from .._tables import exclusive_cumsum

__all__ = ["LawRows"]

#: First capacity of the buffer of added rows (doubled when full: amortised O(1) copies per row).
FIRST_CAPACITY = 16


def _grown(array: np.ndarray, used: int, capacity: int) -> np.ndarray:
    out = np.empty((capacity,) + array.shape[1:], dtype=array.dtype)
    out[:used] = array[:used]
    return out


class LawRows:
    """Float64 rows of width V: ids ``0..K-1`` are ``base`` [K, V] (not copied), later ids rows given to
    :meth:`add`. Rows are never changed once added, so ids stay valid while rows are added.

    ``base_below`` (optional) is ``exclusive_cumsum(base)`` when the caller has it already.
    """

    def __init__(self, base: np.ndarray, *, base_below: np.ndarray | None = None):
        self.base = base
        self.count, self.vocab = base.shape
        self.size = self.count
        self._base_below = base_below
        self._base_total = None
        self._base_square = None
        self._extra = np.empty((0, self.vocab))
        self._extra_total = np.empty(0)
        self._extra_below = np.empty((0, self.vocab + 1))
        self._ready = np.zeros(0, dtype=bool)  # whether an added row's cumulative row is computed

    @property
    def added(self) -> int:
        """Rows added after the base."""
        return self.size - self.count

    def add(self, rows: np.ndarray) -> np.ndarray:
        """Append ``rows`` [n, V]; returns their ids."""
        n = rows.shape[0]
        used = self.added
        if used + n > self._extra.shape[0]:
            capacity = max(FIRST_CAPACITY, 2 * self._extra.shape[0], used + n)
            self._extra = _grown(self._extra, used, capacity)
            self._extra_total = _grown(self._extra_total, used, capacity)
            self._ready = _grown(self._ready, used, capacity)
        self._extra[used: used + n] = rows
        self._extra_total[used: used + n] = rows.sum(axis=1)
        self._ready[used: used + n] = False
        self.size += n
        return self.count + used + np.arange(n)

    def _prepare(self, extra_ids: np.ndarray) -> None:
        """Compute the cumulative rows of the added rows ``extra_ids`` (offsets) not done yet."""
        todo = np.unique(extra_ids[~self._ready[extra_ids]])
        if not todo.size:
            return
        if self._extra_below.shape[0] < self._extra.shape[0]:  # the row buffer grew since
            self._extra_below = _grown(self._extra_below, self._extra_below.shape[0], self._extra.shape[0])
        self._extra_below[todo] = exclusive_cumsum(self._extra[todo])
        self._ready[todo] = True

    # -- reads -----------------------------------------------------------------------------------------
    def _read(self, ids, base_read, extra_read, shape_tail=()):
        ids = np.asarray(ids, dtype=np.int64)
        low = ids < self.count
        if low.all():
            return base_read(ids)
        high = ids[~low] - self.count
        out = np.empty(ids.shape + shape_tail)
        out[low] = base_read(ids[low])
        out[~low] = extra_read(high)
        return out

    def gather(self, ids) -> np.ndarray:
        """The rows at ``ids`` (any shape), float64 [..., V]."""
        return self._read(ids, lambda i: self.base[i], lambda i: self._extra[i], (self.vocab,))

    def at(self, ids, tokens) -> np.ndarray:
        """``row[ids][tokens]`` elementwise (``ids`` and ``tokens`` of one shape)."""
        ids = np.asarray(ids, dtype=np.int64)
        tokens = np.broadcast_to(np.asarray(tokens, dtype=np.int64), ids.shape)
        low = ids < self.count
        if low.all():
            return self.base[ids, tokens]
        out = np.empty(ids.shape)
        out[low] = self.base[ids[low], tokens[low]]
        out[~low] = self._extra[ids[~low] - self.count, tokens[~low]]
        return out

    def below_at(self, ids, tokens) -> np.ndarray:
        """``sum_{t < token} row[t]`` elementwise (``tokens`` up to V: ``below_at(ids, V)`` is the total)."""
        ids = np.asarray(ids, dtype=np.int64)
        tokens = np.broadcast_to(np.asarray(tokens, dtype=np.int64), ids.shape)
        if self._base_below is None:
            self._base_below = exclusive_cumsum(self.base)
        low = ids < self.count
        if low.all():
            return self._base_below[ids, tokens]
        high = ids[~low] - self.count
        self._prepare(high)
        out = np.empty(ids.shape)
        out[low] = self._base_below[ids[low], tokens[low]]
        out[~low] = self._extra_below[high, tokens[~low]]
        return out

    def total(self, ids) -> np.ndarray:
        """Each row's sum (its mass: 0 for a residual with nothing left)."""
        if self._base_total is None:
            self._base_total = self.base.sum(axis=1) if self._base_below is None else self._base_below[:, -1]
        return self._read(ids, lambda i: self._base_total[i], lambda i: self._extra_total[i])

    def cumulative_total(self, ids) -> np.ndarray:
        """Each row's total as its cumulative row ends (``below_at(ids, V)``: consistent with :meth:`below_at`)."""
        return self.below_at(ids, self.vocab)

    def square(self, ids) -> np.ndarray:
        """Each row's ``sum_y row(y)^2`` (collision probabilities; computed on demand, not kept)."""
        if self._base_square is None:
            self._base_square = (self.base**2).sum(axis=1)
        return self._read(ids, lambda i: self._base_square[i], lambda i: (self._extra[i] ** 2).sum(axis=1))
