"""A tree scenario's distinct laws as tables, and drafting a node's children from them.

Every slot of a drawn tree reads one row of the tables (``TreeDraw.slot_keys``): a few dozen
rows for a hashed V = 32,000 model, one per context for a Markov model, one per (row, slot) for
fixed rows. Children are drafted from the draft table without building the slot's dense row:

- ``"iid"``: inverse CDF by binary search on the cumulative table
  (:func:`~specdec_check._tables.categorical_from_table`);
- ``"topk"``: the ``j``-th child of a slot is the ``j``-th token of the row's ranking (decreasing
  probability, ties to the smaller id, tokens of probability zero last), the order
  :func:`~specdec_check.exact._tree_drafting.draft_child` takes them in;
- ``"without_replacement"``: a draw from the row, redrawn while it repeats an earlier sibling
  (rejection sampling: the accepted draw has the row's law restricted to the tokens left and
  renormalised, Jeon et al. 2024's proposal), then from the renormalised dense row for the few
  rows still repeating after :data:`REDRAWS` rounds.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from .._tables import categorical, categorical_from_table, exclusive_cumsum, search_table

__all__ = ["REDRAWS", "TreeLawTables", "draft_from_tables"]

#: Rounds of redrawing a without-replacement child that repeats a sibling before the rows left are drawn
#: from their renormalised dense rows (a row whose siblings hold mass m still repeats with probability m^8).
REDRAWS = 8
#: Tokens of each row's ranking kept at least (more than any battery tree's branching: one sort per table).
RANKED = 16


class TreeLawTables:
    """Distinct laws, float64 [K, V] as the sampler sees them (after the backend's cast): ``target``
    and ``draft`` rows, with the cumulative rows and rankings the checker reads."""

    def __init__(self, target: np.ndarray, draft: np.ndarray):
        if target.shape != draft.shape or target.ndim != 2:
            raise ValueError(f"target and draft tables must both be [K, V]; got {target.shape} and {draft.shape}.")
        self.target, self.draft = target, draft
        self.rows, self.vocab = (int(n) for n in target.shape)

    @cached_property
    def target_below(self) -> np.ndarray:
        """Exclusive cumulative target rows [K, V+1] (first-token PITs, final laws at leaves)."""
        return exclusive_cumsum(self.target)

    @cached_property
    def draft_search(self) -> np.ndarray:
        """The draft rows' cumulative table in :func:`~specdec_check._tables.search_table` form."""
        return search_table(exclusive_cumsum(self.draft))

    @cached_property
    def positive(self) -> np.ndarray:
        """Tokens of positive draft probability per row (how many distinct children a row can give)."""
        return (self.draft > 0).sum(axis=1)

    def ranking(self, count: int) -> np.ndarray:
        """int64 [K, count]: each draft row's ``count`` first tokens by decreasing probability (ties to the
        smaller id; a stable sort puts tokens of probability zero last, in id order)."""
        cached = self.__dict__.get("_ranking")
        if cached is None or cached.shape[1] < count:
            keep = min(self.vocab, max(count, RANKED))
            cached = np.ascontiguousarray(np.argsort(-self.draft, axis=1, kind="stable")[:, :keep], dtype=np.int64)
            self.__dict__["_ranking"] = cached
        return cached[:, :count]


def draft_from_tables(drafting: str, tables: TreeLawTables, keys: np.ndarray, rank: np.ndarray, taken: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
    """One child per row under ``drafting``: ``keys`` [B] the parent slot's row, ``rank`` [B] how many
    siblings were drafted before (top-k), ``taken`` int [B, W] their tokens, -1 padded (without replacement).

    Raises ``ValueError`` as :func:`~specdec_check.exact._tree_drafting.draft_child` does when the scheme
    cannot draft the child (more children than tokens, or than tokens of positive draft probability).
    """
    if drafting == "iid":
        return categorical_from_table(tables.draft_search, keys, rng, probs_rows=tables.draft)
    if drafting == "topk":
        if rank.size and int(rank.max()) >= tables.vocab:
            raise ValueError(f"drafting topk needs at most V = {tables.vocab} children per node.")
        count = int(rank.max()) + 1 if rank.size else 1
        return tables.ranking(count)[keys, rank]
    used = (taken >= 0).sum(axis=1)
    short = used >= tables.positive[keys]
    if short.any():
        row = int(np.flatnonzero(short)[0])
        raise ValueError(f"row {row}: drafting {drafting} needs more children than the draft row has tokens of "
                         f"positive probability ({int(tables.positive[keys[row]])}); give that tree fewer children "
                         "per node or draft laws with a wider support.")
    token = categorical_from_table(tables.draft_search, keys, rng, probs_rows=tables.draft)
    repeat = np.flatnonzero((taken == token[:, None]).any(axis=1))
    for _ in range(REDRAWS):
        if not repeat.size:
            return token
        token[repeat] = categorical_from_table(tables.draft_search, keys[repeat], rng, probs_rows=tables.draft)
        repeat = repeat[(taken[repeat] == token[repeat, None]).any(axis=1)]
    if repeat.size:
        rows = tables.draft[keys[repeat]]
        hit = taken[repeat] >= 0
        rows[np.repeat(np.arange(repeat.size), hit.sum(axis=1)), taken[repeat][hit]] = 0.0
        token[repeat] = categorical(rows / rows.sum(axis=1, keepdims=True), rng)
    return token
