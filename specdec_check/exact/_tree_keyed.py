"""The exact per-row laws of a tree step from keyed law tables: one residual computed per distinct state.

:func:`~specdec_check.exact._tree_kernels.tree_laws` walks dense rows ``[B, N+1, V]``: every slot of
every row pays O(V) per child. The checker's scenarios name their distinct laws instead (a
hashed V = 32,000 model has a few dozen; :meth:`~specdec_check.models.CausalModel.law_keys`):
slot ``s`` of row ``b`` reads ``target_rows[slot_keys[b, s]]`` and ``draft_rows[slot_keys[b, s]]``.
The multi-round rejection walk (Miao et al. 2023, Algorithm 2; Jeon et al. 2024; rules.md
section 3) only ever transforms a slot's residual by its rejected children, so the residual after
``j`` rejected children is a function of a short *state*:

- ``"iid"``: ``r_{j+1} = norm(max(r_j - q, 0))`` with ``q`` the slot's draft row: the state is
  (previous state, the slot's law key), key-level: a few rows per distinct law;
- ``"topk"``: ``r_{j+1} = norm(r_j`` with ``x_j`` zeroed``)``: (previous state, ``x_j``), key-level
  for the checker's own top-k drafts (the children are a function of the key);
- ``"without_replacement"``: ``r_{j+1} = norm(max(r_j - norm(m_j), 0))`` and ``m_{j+1} = m_j`` with
  ``x_j`` zeroed (``m`` the draft row with the drafted siblings removed): (previous state, ``m_j``'s
  state); the remaining-draft state ``(m_j, x_j)`` is made only where a later sibling needs it.

Each node's rows are grouped by state (:func:`numpy.unique` on an int64 signature), the new
residual rows are computed once per distinct state with the dense kernel's arithmetic, and a
:class:`StateTable` may be kept across the draws of one scenario (key-level states recur).
"""

from __future__ import annotations

import numpy as np

from ._law_rows import LawRows
from ._tree_kernels import RULES, TreeLaws, acceptance_ratio, slot_depths, slot_parents

__all__ = ["MAX_STATE_CELLS", "StateTable", "tree_laws_keyed"]

#: Cells of residual rows a kept :class:`StateTable` may add (float64 rows and their cumulative rows:
#: about 64 MiB); past it :func:`tree_laws_keyed` starts a fresh table.
MAX_STATE_CELLS = 1 << 22


def _normalise(rows: np.ndarray, out=None) -> np.ndarray:
    """Rows divided by their sums (rows of sum 0 become 0); in place when ``out`` is ``rows``."""
    total = rows.sum(axis=-1, keepdims=True)
    if out is None:
        return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)
    np.divide(rows, total, out=out, where=total > 0)
    out[~(total[..., 0] > 0)] = 0.0
    return out


class StateTable:
    """Residual rows by state id (:class:`~specdec_check.exact._law_rows.LawRows` over ``target_rows``:
    ids ``0..K-1`` are the slots' target rows, the residual before any child is tried) and the
    signatures of the states added since, so a state met again (another slot, row or draw) is
    looked up, not recomputed. ``remaining`` holds the without-replacement scheme's draft rows with
    drafted siblings removed (ids ``0..K-1``: ``draft_rows``)."""

    def __init__(self, target_rows: np.ndarray, draft_rows: np.ndarray, target_below: np.ndarray | None = None):
        self.target_rows, self.draft_rows = target_rows, draft_rows
        self.residuals = LawRows(target_rows, base_below=target_below)
        self.remaining = LawRows(draft_rows)
        self._signatures = np.zeros(0, dtype=np.int64)  # sorted
        self._ids = np.zeros(0, dtype=np.int64)

    @property
    def full(self) -> bool:
        return (self.residuals.added + self.remaining.added) * self.residuals.vocab > MAX_STATE_CELLS

    def lookup(self, signature: np.ndarray, make) -> np.ndarray:
        """The state id of every int64 signature [n]; ``make(first)`` returns the residual rows of the
        signatures not seen yet, given one occurrence of each (an index array into ``signature``)."""
        distinct, first, inverse = np.unique(signature, return_index=True, return_inverse=True)
        ids = np.empty(distinct.size, dtype=np.int64)
        known = np.zeros(distinct.size, dtype=bool)
        if self._signatures.size:
            where = np.minimum(np.searchsorted(self._signatures, distinct), self._signatures.size - 1)
            known = self._signatures[where] == distinct
            ids[known] = self._ids[where[known]]
        new = np.flatnonzero(~known)
        if new.size:
            ids[new] = self.residuals.add(make(first[new]))
            signatures = np.concatenate([self._signatures, distinct[new]])
            order = np.argsort(signatures, kind="stable")
            self._signatures, self._ids = signatures[order], np.concatenate([self._ids, ids[new]])[order]
        return ids[inverse.reshape(-1)]


def _signature(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    return a.astype(np.int64) * np.int64(width) + b


def _later_sibling(slot_parent: np.ndarray) -> np.ndarray:
    """bool [B, N]: whether node ``i`` has a later sibling (a later node with the same parent)."""
    parent = slot_parent[:, 1:]
    later = np.zeros(parent.shape, dtype=bool)
    for i in range(parent.shape[1] - 1):
        later[:, i] = (parent[:, i + 1:] == parent[:, i, None]).any(axis=1)
    return later


def tree_laws_keyed(parents, draft_token_ids, slot_keys, target_rows, draft_rows, rule, *,
                    target_below: np.ndarray | None = None, states: StateTable | None = None):
    """The exact per-row law of one tree step under ``rule`` (one of :data:`RULES`), unvalidated:
    ``(laws, states)``.

    Slot ``s`` of row ``b`` has target row ``target_rows[slot_keys[b, s]]`` and draft row
    ``draft_rows[slot_keys[b, s]]`` (float64 [K, V]); ``target_below`` is ``exclusive_cumsum(target_rows)``
    when the caller keeps it. ``laws`` equals :func:`~specdec_check.exact._tree_kernels.tree_laws` on
    the gathered rows (the same arithmetic per row: tested against it); its final laws are rows of
    ``states``, the :class:`StateTable` used: the one given when it was built on these tables and is
    not full, else a new one. Keep it across calls for ``rule`` "iid" and "topk", whose states recur.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}; got {rule!r}.")
    ids = np.asarray(draft_token_ids, dtype=np.int64)
    keys = np.asarray(slot_keys, dtype=np.int64)
    batch, nodes = ids.shape
    vocab = target_rows.shape[1]
    rows = np.arange(batch)
    slot_parent = slot_parents(parents)
    depth = slot_depths(slot_parent)
    if states is None or states.target_rows is not target_rows or states.draft_rows is not draft_rows \
            or states.full:
        states = StateTable(target_rows, draft_rows, target_below)
    residuals, left = states.residuals, states.remaining
    residual = keys.copy()  # the residual state of every slot
    wr = rule == "without_replacement"
    remaining = keys.copy() if wr else None  # ids into ``left``: the draft row with drafted siblings removed
    later = _later_sibling(slot_parent) if wr else None
    alive = np.ones((batch, nodes + 1))  # P(no child of the slot accepted yet | slot reached)
    reach = np.zeros((batch, nodes + 1))
    reach[:, 0] = 1.0
    accept = np.zeros((batch, nodes))
    for i in range(nodes):
        u = slot_parent[:, i + 1]
        x = ids[:, i]
        state = residual[rows, u]
        r_x = residuals.at(state, x)
        if rule == "topk":
            a = np.minimum(r_x, 1.0)
            signature = _signature(state, x, vocab)

            def make(first, state=state, x=x):
                new = residuals.gather(state[first])
                new[np.arange(first.size), x[first]] = 0.0
                return _normalise(new, out=new)
        elif rule == "iid":
            key = keys[rows, u]
            a = acceptance_ratio(r_x, draft_rows[key, x])
            signature = _signature(state, key, draft_rows.shape[0])

            def make(first, state=state, key=key):
                new = residuals.gather(state[first])
                np.subtract(new, draft_rows[key[first]], out=new)
                np.maximum(new, 0.0, out=new)
                return _normalise(new, out=new)
        else:
            m = remaining[rows, u]
            total = left.total(m)
            with np.errstate(divide="ignore", invalid="ignore"):
                q_x = np.where(total > 0, left.at(m, x) / np.where(total > 0, total, 1.0), 0.0)
            a = acceptance_ratio(r_x, q_x)
            signature = _signature(state, m, 1 << 31)

            def make(first, state=state, m=m, total=total):
                q = left.gather(m[first])  # normalised with the totals kept (the dense kernel's sums)
                np.divide(q, total[first, None], out=q, where=total[first, None] > 0)
                q[~(total[first] > 0)] = 0.0
                new = residuals.gather(state[first])
                np.subtract(new, q, out=new)
                np.maximum(new, 0.0, out=new)
                return _normalise(new, out=new)
        accept[:, i] = a
        reach[:, i + 1] = reach[rows, u] * alive[rows, u] * a
        alive[rows, u] *= 1.0 - a
        residual[rows, u] = states.lookup(signature, make)
        if wr:
            need = np.flatnonzero(later[:, i])  # rows whose later siblings of node i are drafted from what is left
            if need.size:
                distinct, first, inverse = np.unique(_signature(m[need], x[need], vocab), return_index=True,
                                                     return_inverse=True)
                pick = need[first]
                new = left.gather(m[pick])
                new[np.arange(pick.size), x[pick]] = 0.0
                remaining[need, u[need]] = left.add(new)[inverse.reshape(-1)]
    stop = reach * alive
    laws = TreeLaws(slot_parent=slot_parent, depth=depth, accept=accept, reach=reach, stop=stop,
                    final_rows=residuals, final_index=residual)
    return laws, states
