"""Scenarios: a target, a draft, how contexts are drawn, gamma and rows per call."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .._validation import as_token_array, check_gamma, check_probability_rows
from ..exact import num_step_outcomes
from ..models import CausalModel
from ..models import last_context_indices
from .._tables import categorical, categorical_from_table, search_table_of
from ._memory import populated_empty

__all__ = ["GeneratorScenario", "LawTables", "VerifierDraw", "VerifierScenario", "distinct_laws"]

#: Largest (pool size x step outcomes) for which the integrated step law is enumerated.
MAX_STEP_CELLS = 200_000
#: Largest law table (distinct laws x V) a scenario precomputes for the checker's keyed laws.
MAX_TABLE_CELLS = 1 << 21
#: Most contexts ((V+1)^order) a scenario enumerates to find its distinct laws.
MAX_CONTEXTS = 1 << 22


def distinct_laws(target: CausalModel, draft: CausalModel, *, max_cells: int = MAX_TABLE_CELLS):
    """``(row, representatives)`` for a target and draft model: the row of every context of
    ``max(target.order, draft.order)`` tokens in a table of their distinct (target, draft) law pairs
    (int64 [(V+1)^order], contexts as base-(V+1) numbers, ``V`` standing for start-of-sequence) and
    one context per row; None when the table would pass ``max_cells`` cells (rows x V) or the
    contexts :data:`MAX_CONTEXTS`.

    Contexts share a row when both models give them the same law key
    (:meth:`~specdec_check.models.CausalModel.law_keys`), so a hashed model over V = 32,000
    needs one row per (target prototype, draft prototype) pair, not one per context.
    """
    vocab = target.vocab_size
    order, base = max(target.order, draft.order), vocab + 1
    count = base**order
    keyed = target.num_law_keys is not None and draft.num_law_keys is not None
    if count > MAX_CONTEXTS or (not keyed and count * vocab > max_cells):
        return None
    contexts = np.stack(np.unravel_index(np.arange(count), (base,) * order), axis=1) if order else \
        np.zeros((1, 0), dtype=np.int64)
    target_keys, draft_keys = target.law_keys(contexts), draft.law_keys(contexts)
    if target_keys is None or draft_keys is None:
        joint = np.arange(count)
    else:  # dense ranks first: a product of raw key counts may not fit in int64
        target_rank = np.unique(np.asarray(target_keys).reshape(-1), return_inverse=True)[1].reshape(-1)
        draft_rank = np.unique(np.asarray(draft_keys).reshape(-1), return_inverse=True)[1].reshape(-1)
        joint = target_rank.astype(np.int64) * (int(draft_rank.max()) + 1) + draft_rank
    distinct, first, row = np.unique(joint, return_index=True, return_inverse=True)
    if distinct.size * vocab > max_cells:
        return None
    return row.reshape(-1).astype(np.int64), contexts[first]


@dataclass(frozen=True)
class VerifierDraw:
    """One call's worth of verifier inputs and the float64 laws of what the sampler sees."""

    draft_token_ids: np.ndarray  # int64 [B, g]
    draft_probs: np.ndarray  # float64 [B, g, V] (law rows, after the backend's cast)
    target_probs: np.ndarray  # float64 [B, g+1, V]
    pool_index: np.ndarray  # int64 [B]: which context of the pool each row used
    #: int64 [B, g+1] or None: each position's row in :meth:`VerifierScenario.law_tables`
    #: (``target_probs[b, j] == target_table[context_keys[b, j]]``, the same for the draft).
    context_keys: np.ndarray | None = None

    def head(self, rows: int) -> "VerifierDraw":
        """The first ``rows`` rows, or the rows a slice or an int index array picks."""
        pick = slice(0, rows) if isinstance(rows, (int, np.integer)) else rows
        keys = None if self.context_keys is None else self.context_keys[pick]
        return VerifierDraw(self.draft_token_ids[pick], self.draft_probs[pick], self.target_probs[pick],
                            self.pool_index[pick], keys)


class LawTables:
    """A scenario's laws after every context, float64 [K, V], with their cumulative rows.

    ``*_below`` are exclusive cumulative rows of width ``V + 1``: ``below[r, y] = sum_{t<y} law[r, t]``
    and ``below[r, V]`` is the row's total. ``final_below`` stacks those of the residuals
    ``max(0, p - q)`` (rows ``0..K-1``) and of the target rows (rows ``K..2K-1``, for the bonus
    position): the laws of the final token of a step given where it stopped (Leviathan et al.
    2023, Algorithm 1).
    """

    def __init__(self, target: np.ndarray, draft: np.ndarray):
        self.target, self.draft = target, draft
        self.rows = target.shape[0]
        residual = np.maximum(target - draft, 0.0)
        # One array for the residual and target rows (final_below stacks both), filled in place: no
        # concatenated copy of the three tables (at V = 32,000 that copy was the scenario's peak memory).
        self.final_below = np.empty((2 * self.rows, target.shape[1] + 1))
        for part, rows in ((slice(0, self.rows), residual), (slice(self.rows, 2 * self.rows), target)):
            self.final_below[part, 0] = 0.0
            np.cumsum(rows, axis=1, out=self.final_below[part, 1:])
        self.target_below = self.final_below[self.rows:]
        #: The draft rows' exclusive cumulative rows, padded for :func:`~specdec_check._tables.categorical_from_table`.
        self.draft_search = search_table_of(draft)
        #: ``sum_y law(y)^2`` of each (unnormalised) row of ``final_below``: collision probabilities.
        self.final_square = np.concatenate([(residual**2).sum(axis=1), (target**2).sum(axis=1)])
        #: ``sum_y max(p(y) - q(y), 0)`` of each row in float64: block verification's residual mass at weight 1
        #: (:func:`specdec_check.exact.kernels.block_weights`' ``unit_residual_mass``, computed as it computes it).
        # (C order: a row summed along contiguous memory, as the kernel sums the rows of the draws gathered from here)
        wide = residual if residual.dtype == np.float64 else np.maximum(
            np.asarray(target, dtype=np.float64) - np.asarray(draft, dtype=np.float64), 0.0)
        self.residual_mass = np.ascontiguousarray(wide).sum(axis=1)


@dataclass(frozen=True, eq=False)
class VerifierScenario:
    """Inputs for a verifier: rows drawn along drafted paths from a pool of contexts.

    Each row picks one of ``prompt_pool`` random prompts (lengths in ``prompt_lengths``),
    drafts ``gamma`` tokens from ``draft`` along its own path and scores every position
    with ``target``, so rows and positions see different target and draft rows.
    ``from_rows`` builds a scenario from fixed rows instead (drafts still drawn per call).
    """

    name: str
    target: CausalModel | None
    draft: CausalModel | None
    gamma: int
    rows_per_call: int
    prompt_pool: int = 8
    prompt_lengths: tuple = (0, 4)
    description: str = ""
    seed: int = 0
    fixed_target_probs: np.ndarray | None = field(default=None, repr=False)
    fixed_draft_probs: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        check_gamma(self.gamma)
        if self.fixed_target_probs is None:
            for role, model in (("target", self.target), ("draft", self.draft)):
                if not isinstance(model, CausalModel):
                    raise TypeError(f"scenario {self.name!r}: {role} must be a specdec_check model; got {type(model).__name__}.")
            if self.target.vocab_size != self.draft.vocab_size:
                raise ValueError(f"scenario {self.name!r}: target and draft vocabularies differ.")
        if not isinstance(self.rows_per_call, (int, np.integer)) or self.rows_per_call < 1:
            raise ValueError(f"scenario {self.name!r}: rows_per_call must be an int >= 1; got {self.rows_per_call!r}.")
        lo, hi = self.prompt_lengths
        if not 0 <= lo <= hi:
            raise ValueError(f"scenario {self.name!r}: prompt_lengths must be (min, max) with 0 <= min <= max.")

    @classmethod
    def from_rows(cls, name: str, *, target_probs, draft_probs, description: str = "") -> "VerifierScenario":
        """A scenario with fixed rows: target_probs [B, g+1, V], draft_probs [B, g, V]."""
        target_probs = check_probability_rows(target_probs, name="target_probs")
        draft_probs = check_probability_rows(draft_probs, name="draft_probs")
        if target_probs.ndim != 3 or draft_probs.ndim != 3:
            raise ValueError("target_probs must be [B, gamma+1, V] and draft_probs [B, gamma, V].")
        batch, gamma, vocab = draft_probs.shape
        if target_probs.shape != (batch, gamma + 1, vocab):
            raise ValueError(
                f"target_probs must have shape {(batch, gamma + 1, vocab)} to match draft_probs {draft_probs.shape}; "
                f"got {target_probs.shape}."
            )
        return cls(name, None, None, gamma, batch, prompt_pool=batch, description=description,
                   fixed_target_probs=target_probs, fixed_draft_probs=draft_probs)

    @property
    def vocab_size(self) -> int:
        if self.fixed_target_probs is not None:
            return int(self.fixed_target_probs.shape[-1])
        return int(self.target.vocab_size)

    @property
    def enumerable(self) -> bool:
        """Whether the integrated step law over (context, emitted string) is small enough to enumerate."""
        return self.fixed_target_probs is None and self.prompt_pool * num_step_outcomes(self.vocab_size, self.gamma) <= MAX_STEP_CELLS

    @property
    def context_order(self) -> int:
        """Tokens of context the two models read together (the larger of their orders)."""
        return max(self.target.order, self.draft.order)

    @cached_property
    def _law_index(self):
        """``(row, representatives)``: the law-table row of every context (int64 [(V+1)^order],
        contexts as base-(V+1) numbers) and one context per row; None without tables
        (:func:`distinct_laws`)."""
        if self.fixed_target_probs is not None:
            return None
        return distinct_laws(self.target, self.draft)

    @property
    def table_rows(self) -> int | None:
        """Number of distinct laws in :meth:`law_tables` when they fit a table, else None."""
        index = self._law_index
        return None if index is None else int(index[1].shape[0])

    def law_tables(self, law_rows=None) -> "LawTables | None":
        """The distinct laws after every context of :attr:`context_order` tokens (as ``law_rows``
        casts them), rows indexed by ``VerifierDraw.context_keys``; None when the tables would
        exceed :data:`MAX_TABLE_CELLS` cells (fixed rows, or models without law keys over a
        large vocabulary)."""
        index = self._law_index
        if index is None:
            return None
        cast = law_rows if law_rows is not None else (lambda r: r)
        return LawTables(cast(self.target.probs_at(index[1])), cast(self.draft.probs_at(index[1])))

    def prompts(self) -> np.ndarray:
        """The pool of prompts, int64 [prompt_pool, max_len] left-padded with -1."""
        rng = np.random.default_rng([self.seed, 0x5EED])
        lo, hi = self.prompt_lengths
        lengths = rng.integers(lo, hi + 1, size=self.prompt_pool)
        pool = np.full((self.prompt_pool, max(hi, 1)), -1, dtype=np.int64)
        for i, n in enumerate(lengths):
            if n:
                pool[i, -n:] = rng.integers(0, self.vocab_size, size=n)
        return pool

    def _pool_contexts(self, pool, order) -> np.ndarray:
        """``last_context_indices`` of the prompt pool, computed once for the pool every draw of a run is given
        (0.1 ms a draw, 818 draws in the default battery; issue 31); another pool is computed afresh."""
        kept = self.__dict__.get("_kept_pool_contexts")
        if kept is not None and kept[0].shape == pool.shape and kept[1] == order and np.array_equal(kept[0], pool):
            return kept[2]
        start = last_context_indices(pool, order=order, vocab_size=self.vocab_size)
        start.setflags(write=False)
        self.__dict__["_kept_pool_contexts"] = (np.array(pool, copy=True), order, start)
        return start

    def draw(self, rng: np.random.Generator, law_rows=None, *, pool=None, rows=None, tables=None,
             calls: int = 1, layout=None) -> VerifierDraw:
        """Draw one call's inputs; ``law_rows`` maps float64 rows to what the sampler will see (None: as they are).

        ``rows`` (at most ``rows_per_call``) draws a smaller call, for checks that need pairs of
        outputs rather than many rows. ``tables``, this scenario's :meth:`law_tables` under the
        same ``law_rows``, lets the rows be gathered from the tables (the same draw, faster).
        ``calls`` draws that many calls at once, one after the other along the rows (call ``c``
        is ``draw.head(slice(c * rows, (c + 1) * rows))``): every row is drawn independently, so
        each window is distributed as one call, and small calls share the cost of drawing.
        ``layout`` (int indices into the drawn rows, repeats allowed) returns ``draw.head(layout)`` of the same
        draw; rows gathered from ``tables`` are gathered in that layout at once, with no draw beside the copy
        (the within-call pairs' rows twice each: 82 MB at V = 32,000 instead of 41 + 82 MB).
        """
        if layout is not None:
            layout = np.asarray(layout, dtype=np.intp)
            if not (self.table_rows is not None and tables is not None and self.fixed_target_probs is None):
                return self.draw(rng, law_rows, pool=pool, rows=rows, tables=tables, calls=calls).head(layout)
        gamma = self.gamma
        batch = self.rows_per_call if rows is None else max(1, min(int(rows), self.rows_per_call))
        cast = law_rows is not None
        law_rows = law_rows if cast else (lambda rows: rows)
        if self.fixed_target_probs is not None:  # the same fixed rows in every call, drafts drawn afresh
            # Copies: the sampler's inputs never alias the scenario's own rows, so a sampler that writes
            # into them (around the read-only flag) cannot change what later calls and runs are given.
            draft_probs = np.array(law_rows(self.fixed_draft_probs[:batch]))
            target_probs = np.array(law_rows(self.fixed_target_probs[:batch]))
            if calls > 1:
                draft_probs, target_probs = np.tile(draft_probs, (calls, 1, 1)), np.tile(target_probs, (calls, 1, 1))
            ids = np.empty((batch * calls, gamma), dtype=np.int64)
            for j in range(gamma):
                ids[:, j] = categorical(draft_probs[:, j], rng)
            return VerifierDraw(ids, draft_probs, target_probs, np.tile(np.arange(batch), calls))
        batch *= calls
        pool = self.prompts() if pool is None else pool
        order = max(self.target.order, self.draft.order)
        start = self._pool_contexts(pool, order)  # [pool, order]
        index = rng.integers(0, pool.shape[0], size=batch)
        context = start[index]
        vocab = self.vocab_size
        ids = np.empty((batch, gamma), dtype=np.int64)
        keyed = self.table_rows is not None
        keys = np.empty((batch, gamma + 1), dtype=np.int64) if keyed else None
        law_row = self._law_index[0] if keyed else None
        weights = (vocab + 1) ** np.arange(order - 1, -1, -1)
        if keyed and tables is not None:  # contexts first, then one gather per table
            if tables.rows != self.table_rows or tables.target.shape[1] != vocab:  # keys index rows unchecked below
                raise ValueError(f"scenario {self.name!r}: context keys outside its law tables ({tables.rows} rows of "
                                 f"V={tables.target.shape[1]}, need {self.table_rows} of V={vocab}); pass this "
                                 "scenario's own law_tables().")
            for j in range(gamma + 1):
                keys[:, j] = law_row[context @ weights]
                if j < gamma:
                    ids[:, j] = categorical_from_table(tables.draft_search, keys[:, j], rng, probs_rows=tables.draft)
                    if order:
                        context = np.concatenate([context[:, 1:], ids[:, j, None]], axis=1)
            if layout is not None:
                ids, keys, index, batch = ids[layout], keys[layout], index[layout], layout.size
            draft_probs = np.take(tables.draft, keys[:, :gamma], axis=0, mode="clip",
                                  out=populated_empty((batch, gamma, vocab)))
            target_probs = np.take(tables.target, keys, axis=0, mode="clip", out=populated_empty((batch, gamma + 1, vocab)))
            return VerifierDraw(ids, draft_probs, target_probs, index, keys)
        draft_probs = populated_empty((batch, gamma, vocab))
        target_probs = populated_empty((batch, gamma + 1, vocab))
        for j in range(gamma + 1):
            if keyed:
                keys[:, j] = law_row[context @ weights]
            target_probs[:, j] = law_rows(self.target.probs_at(context))
            if j < gamma:
                draft_probs[:, j] = law_rows(self.draft.probs_at(context))
                # Uncast rows: the model's cumulative rows (a cached table for Markov models) give the same draw.
                ids[:, j] = categorical(draft_probs[:, j], rng, cdf=None if cast else self.draft.cdf_at(context))
                if order:
                    context = np.concatenate([context[:, 1:], ids[:, j, None]], axis=1)
        return VerifierDraw(ids, draft_probs, target_probs, index, keys)


@dataclass(frozen=True, eq=False)
class GeneratorScenario:
    """Inputs for a decode loop: models, gamma, how many tokens, and a set of prompts.

    ``prompts`` is int [P, L] with ``-1`` padding; the checker tiles it to fill its batch.
    """

    name: str
    target: CausalModel
    draft: CausalModel
    gamma: int
    max_new_tokens: int
    prompts: np.ndarray
    description: str = ""
    rows_per_call: int = 512

    def __post_init__(self):
        check_gamma(self.gamma)
        if self.target.vocab_size != self.draft.vocab_size:
            raise ValueError(f"scenario {self.name!r}: target and draft vocabularies differ.")
        object.__setattr__(self, "prompts", as_token_array(self.prompts, vocab_size=self.target.vocab_size, name="prompts"))
        if self.max_new_tokens < 1:
            raise ValueError(f"scenario {self.name!r}: max_new_tokens must be >= 1.")

    @property
    def vocab_size(self) -> int:
        return int(self.target.vocab_size)

    @property
    def enumerable(self) -> bool:
        return self.prompts.shape[0] * self.vocab_size**self.max_new_tokens <= MAX_STEP_CELLS
