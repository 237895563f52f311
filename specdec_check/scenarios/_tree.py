"""Tree scenarios: a target, a draft, tree shapes, and how each call's trees are drafted.

The checker drafts every tree itself with the scheme it was told the verifier expects
(:mod:`specdec_check.exact._tree_drafting`): node ``i``'s token comes from the draft's law after
its parent's path, and every slot's target and draft rows are the models' laws after that slot's
path (slot 0 the root, slot ``i + 1`` node ``i``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .._validation import check_probability_rows
from ..exact import check_tree, tree_depth, tree_sequence_law
from ..exact._outcomes import num_step_outcomes
from ..exact._tree import MAX_ENUMERATION_CELLS
from ..exact._tree_drafting import check_drafting, draft_child
from ..exact._tree_kernels import slot_depths, slot_parents
from ..models import CausalModel, last_context_indices
from ._memory import populated_empty
from ._scenario import distinct_laws
from ._tree_tables import TreeLawTables, draft_from_tables

__all__ = ["TreeDraw", "TreeScenario", "eagle_like_tree", "random_tree", "star_tree", "chain_tree"]

#: Largest (prompts x emitted strings) for which the integrated sequence law is enumerated.
MAX_SEQUENCE_CELLS = 200_000
#: Largest table of distinct laws (rows x V) a tree scenario keeps (4M cells: 32 MiB per table): a hashed
#: V = 32,000 pair needs up to 64 rows; beyond it the rows are drawn dense from the models.
MAX_TREE_TABLE_CELLS = 1 << 22


class TreeDraw:
    """One call's (or a pooled draw's) tree-verifier inputs, and the laws of what the sampler sees.

    Slot ``s`` of row ``b`` reads row ``slot_keys[b, s]`` of ``tables`` (a
    :class:`~specdec_check.scenarios._tree_tables.TreeLawTables`, float64 after the backend's cast):
    ``target_probs[b, s] == tables.target[slot_keys[b, s]]``, the same for the draft. The dense
    ``[B, N+1, V]`` arrays a verifier receives are gathered on first use, so a pooled draw of many
    calls costs its keys and tokens only, and each call's window gathers its own rows.

    ``TreeDraw(parents, draft_token_ids, draft_probs, target_probs, pool_index)`` wraps dense arrays
    (their rows are the table: one key per slot of each row).
    """

    def __init__(self, parents, draft_token_ids, draft_probs=None, target_probs=None, pool_index=None, *,
                 slot_keys=None, tables=None):
        self.parents = parents  # int64 [B, N]
        self.draft_token_ids = draft_token_ids  # int64 [B, N]
        batch, nodes = draft_token_ids.shape
        self.pool_index = np.zeros(batch, dtype=np.int64) if pool_index is None else pool_index  # int64 [B]
        if tables is None:
            if draft_probs is None or target_probs is None:
                raise ValueError("give the dense draft_probs and target_probs, or slot_keys and tables.")
            vocab = target_probs.shape[-1]
            draft_probs, target_probs = np.ascontiguousarray(draft_probs), np.ascontiguousarray(target_probs)
            tables = TreeLawTables(target_probs.reshape(-1, vocab), draft_probs.reshape(-1, vocab))
            slot_keys = np.arange(batch * (nodes + 1), dtype=np.int64).reshape(batch, nodes + 1)
        self.slot_keys = slot_keys  # int64 [B, N+1]: each slot's row of ``tables``
        self.tables = tables
        self._draft, self._target = draft_probs, target_probs

    @property
    def rows(self) -> int:
        return int(self.draft_token_ids.shape[0])

    def _gather(self, table):
        # A plain buffer: a call's rows are a few MiB, which malloc serves from pages it reuses (faster here
        # than a populated mapping); mode="clip" gathers in place (numpy buffers ``out`` under "raise").
        shape = self.slot_keys.shape + (self.tables.vocab,)
        return np.take(table, self.slot_keys, axis=0, out=np.empty(shape), mode="clip")

    @property
    def draft_probs(self) -> np.ndarray:
        """float64 [B, N+1, V] (gathered from the tables on first use)."""
        if self._draft is None:
            self._draft = self._gather(self.tables.draft)
        return self._draft

    @property
    def target_probs(self) -> np.ndarray:
        """float64 [B, N+1, V] (gathered from the tables on first use)."""
        if self._target is None:
            self._target = self._gather(self.tables.target)
        return self._target

    def head(self, pick) -> "TreeDraw":
        """The first ``pick`` rows, or the rows a slice or an index array picks."""
        pick = slice(0, pick) if isinstance(pick, (int, np.integer)) else pick
        draw = TreeDraw(self.parents[pick], self.draft_token_ids[pick], pool_index=self.pool_index[pick],
                        slot_keys=self.slot_keys[pick], tables=self.tables)
        if self._draft is not None:
            draw._draft = self._draft[pick]
        if self._target is not None:
            draw._target = self._target[pick]
        return draw


def chain_tree(nodes: int) -> np.ndarray:
    """A chain of ``nodes`` nodes: ``[-1, 0, 1, ..., nodes - 2]`` (a chain verifier's drafts)."""
    return np.arange(-1, nodes - 1, dtype=np.int64)


def star_tree(children: int) -> np.ndarray:
    """``children`` children of the root and nothing else."""
    return np.full(children, -1, dtype=np.int64)


def eagle_like_tree(widths) -> np.ndarray:
    """A static tree shaped like EAGLE's: ``widths[d]`` lists, for each node of depth ``d`` in order, how
    many children it gets (the better-ranked nodes get more), breadth first. ``widths[0]`` is the root's
    list ``[k]``."""
    parents, frontier = [], [-1]
    for level in widths:
        if len(level) > len(frontier):
            raise ValueError(f"a level lists {len(level)} nodes but only {len(frontier)} exist at that depth.")
        nxt = []
        for parent, count in zip(frontier, level):
            for _ in range(count):
                nxt.append(len(parents))
                parents.append(parent)
        frontier = nxt
    return np.asarray(parents, dtype=np.int64)


def random_tree(rng: np.random.Generator, nodes: int, *, max_branching: int = 4, max_depth: int = 6) -> np.ndarray:
    """A random tree of ``nodes`` nodes with at most ``max_branching`` children per node and depth at most
    ``max_depth`` (each node attaches to a uniformly chosen earlier slot that still has room)."""
    parents, depth, kids = [], [0], [0]
    for _ in range(nodes):
        room = [s for s in range(len(depth)) if kids[s] < max_branching and depth[s] < max_depth]
        if not room:
            raise ValueError(f"no tree of {nodes} nodes fits branching {max_branching} and depth {max_depth}.")
        s = int(room[rng.integers(len(room))])
        parents.append(s - 1)
        kids[s] += 1
        depth.append(depth[s] + 1)
        kids.append(0)
    return np.asarray(parents, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class TreeScenario:
    """Inputs for a tree verifier: trees drafted along each row's own paths from a pool of prompts.

    ``trees`` is one tree ``[N]`` or a pool ``[S, N]`` of shapes with the same number of nodes (each
    row picks one at random). Each row picks one of ``prompt_pool`` random prompts; every slot's rows
    are the models' laws after its path. :meth:`from_rows` builds a scenario from fixed rows instead
    (the tokens are still drafted per call, from the fixed draft rows).
    """

    name: str
    target: CausalModel | None
    draft: CausalModel | None
    trees: np.ndarray
    rows_per_call: int
    prompt_pool: int = 8
    prompt_lengths: tuple = (0, 4)
    description: str = ""
    seed: int = 0
    #: Drafting schemes this scenario cannot be drafted with (a scheme its draft laws do not allow).
    excluded: tuple = ()
    fixed_target_probs: np.ndarray | None = field(default=None, repr=False)
    fixed_draft_probs: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        trees = check_tree(self.trees, name=f"scenario {self.name!r}: trees")
        if trees.shape[1] < 1:
            raise ValueError(f"scenario {self.name!r}: a tree needs at least one node.")
        object.__setattr__(self, "trees", trees)
        if self.fixed_target_probs is None:
            for role, model in (("target", self.target), ("draft", self.draft)):
                if not isinstance(model, CausalModel):
                    raise TypeError(f"scenario {self.name!r}: {role} must be a specdec_check model; got "
                                    f"{type(model).__name__}.")
            if self.target.vocab_size != self.draft.vocab_size:
                raise ValueError(f"scenario {self.name!r}: target and draft vocabularies differ.")
        if not isinstance(self.rows_per_call, (int, np.integer)) or self.rows_per_call < 1:
            raise ValueError(f"scenario {self.name!r}: rows_per_call must be an int >= 1; got {self.rows_per_call!r}.")
        lo, hi = self.prompt_lengths
        if not 0 <= lo <= hi:
            raise ValueError(f"scenario {self.name!r}: prompt_lengths must be (min, max) with 0 <= min <= max.")

    @classmethod
    def from_rows(cls, name: str, *, parents, target_probs, draft_probs, description: str = "") -> "TreeScenario":
        """A scenario with fixed rows: ``parents`` [N], ``target_probs`` / ``draft_probs`` [B, N+1, V]
        (row ``s`` of a slot whatever tokens were drafted above it)."""
        parents = check_tree(parents)
        if parents.shape[0] != 1:
            raise ValueError("from_rows takes one tree: parents of shape [N].")
        target_probs = check_probability_rows(target_probs, name="target_probs")
        draft_probs = check_probability_rows(draft_probs, name="draft_probs")
        shape = (target_probs.shape[0], parents.shape[1] + 1, target_probs.shape[-1])
        if target_probs.ndim != 3 or target_probs.shape != shape or draft_probs.shape != shape:
            raise ValueError(f"target_probs and draft_probs must be [B, N+1, V] = {shape} for a tree of "
                             f"{parents.shape[1]} nodes; got {target_probs.shape} and {draft_probs.shape}.")
        return cls(name, None, None, parents, shape[0], prompt_pool=shape[0], description=description,
                   fixed_target_probs=target_probs, fixed_draft_probs=draft_probs)

    # -- shape ---------------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        if self.fixed_target_probs is not None:
            return int(self.fixed_target_probs.shape[-1])
        return int(self.target.vocab_size)

    @property
    def nodes(self) -> int:
        return int(self.trees.shape[1])

    @property
    def depth(self) -> int:
        """The deepest node's depth over the pool of shapes (the output is ``depth + 1`` wide)."""
        return tree_depth(self.trees)

    @property
    def gamma(self) -> int:
        """The most tokens one step accepts (:attr:`depth`): a step emits at most ``gamma + 1`` tokens, the
        length the rule-agnostic test completes every emission to (as a chain of ``gamma`` drafts)."""
        return self.depth

    @property
    def max_branching(self) -> int:
        return int(max(np.bincount(t + 1).max() for t in self.trees))

    def allows(self, drafting: str) -> bool:
        return check_drafting(drafting) not in self.excluded

    def enumerable(self, drafting: str) -> bool:
        """Whether the sequence law integrated over drafting (and prompts) can be enumerated."""
        if self.fixed_target_probs is not None or self.trees.shape[0] != 1:
            return False
        vocab, nodes = self.vocab_size, self.nodes
        count = 1 if drafting == "topk" else vocab**nodes
        return (count * (nodes + 1) * vocab <= MAX_ENUMERATION_CELLS
                and self.prompt_pool * num_step_outcomes(vocab, self.depth) <= MAX_SEQUENCE_CELLS)

    def integrated_law(self, drafting: str, rule=None, law_model=None) -> np.ndarray:
        """The emitted string's law over (prompt, string), prompts equally likely:
        :func:`~specdec_check.exact.tree_sequence_law` per prompt of the pool, flattened."""
        cast = law_model if law_model is not None else (lambda m: m)
        target, draft = cast(self.target), cast(self.draft)
        laws = [tree_sequence_law(target, draft, self.trees[0], drafting=drafting, rule=rule, prompt=p[p >= 0])
                for p in self.prompts()]
        return np.concatenate(laws) / len(laws)

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

    # -- drawing -------------------------------------------------------------------------------------
    @cached_property
    def _law_index(self):
        """:func:`~specdec_check.scenarios._scenario.distinct_laws` of the models (None: fixed rows, or no
        table fits)."""
        if self.fixed_target_probs is not None:
            return None
        return distinct_laws(self.target, self.draft, max_cells=MAX_TREE_TABLE_CELLS)

    @property
    def keyed(self) -> bool:
        """Whether draws name their rows in :meth:`law_tables` (fixed rows, or models whose distinct laws fit)."""
        return self.fixed_target_probs is not None or self._law_index is not None

    def law_tables(self, law_rows=None) -> TreeLawTables | None:
        """The scenario's distinct laws as ``law_rows`` casts them (None: as they are, kept), rows indexed by
        ``TreeDraw.slot_keys``: one per (target, draft) law pair of the models, or one per (fixed row, slot);
        None when they do not fit (:data:`MAX_TREE_TABLE_CELLS`)."""
        if law_rows is None:
            return self._plain_tables
        return self._tables(law_rows)

    @cached_property
    def _plain_tables(self):
        return self._tables(lambda rows: rows)

    def _tables(self, cast):
        if self.fixed_target_probs is not None:
            vocab = self.vocab_size
            return TreeLawTables(np.ascontiguousarray(cast(self.fixed_target_probs.reshape(-1, vocab))),
                                 np.ascontiguousarray(cast(self.fixed_draft_probs.reshape(-1, vocab))))
        index = self._law_index
        if index is None:
            return None
        return TreeLawTables(np.ascontiguousarray(cast(self.target.probs_at(index[1]))),
                             np.ascontiguousarray(cast(self.draft.probs_at(index[1]))))

    @cached_property
    def _siblings(self):
        """``(rank, earlier)`` per tree shape: int64 [S, N] how many siblings come before each node, and int64
        [S, N, W] their node indices (-1 padded; W = the most siblings before a node, at least 1)."""
        shapes, nodes = self.trees.shape
        rank = np.zeros((shapes, nodes), dtype=np.int64)
        for i in range(nodes):
            rank[:, i] = (self.trees[:, :i] == self.trees[:, i, None]).sum(axis=1)
        earlier = np.full((shapes, nodes, max(1, int(rank.max()) if nodes else 1)), -1, dtype=np.int64)
        for t in range(shapes):
            for i in range(nodes):
                before = np.flatnonzero(self.trees[t, :i] == self.trees[t, i])
                earlier[t, i, : before.size] = before
        return rank, earlier

    def draw(self, rng: np.random.Generator, drafting: str, law_rows=None, *, rows=None, calls: int = 1,
             pool=None, tables=None) -> TreeDraw:
        """Draw ``calls`` calls' worth of rows (one after the other along the rows), drafting every tree
        with ``drafting``; ``law_rows`` maps float64 rows to what the sampler sees (None: unchanged) and
        ``tables`` is :meth:`law_tables` under the same ``law_rows`` (computed when not given).

        Raises ``ValueError`` when the scheme cannot draft a tree (without replacement, more siblings
        than tokens of positive draft probability).
        """
        drafting = check_drafting(drafting)
        batch = (self.rows_per_call if rows is None else max(1, min(int(rows), self.rows_per_call))) * calls
        nodes = self.nodes
        shape_index = rng.integers(0, self.trees.shape[0], size=batch) if self.trees.shape[0] > 1 \
            else np.zeros(batch, dtype=np.int64)
        parents = self.trees[shape_index]
        if not self.keyed:
            return self._draw_dense(rng, drafting, law_rows, parents, pool)
        tables = self.law_tables(law_rows) if tables is None else tables
        slot_parent = slot_parents(parents)
        rank, earlier = (a[shape_index] for a in self._siblings)
        rows_at = np.arange(batch)
        ids = np.empty((batch, nodes), dtype=np.int64)
        keys = np.empty((batch, nodes + 1), dtype=np.int64)

        def child(i):
            if drafting == "without_replacement":
                before = earlier[:, i]
                taken = np.where(before >= 0, ids[rows_at[:, None], before.clip(min=0)], -1)
            else:
                taken = None
            return draft_from_tables(drafting, tables, keys[rows_at, slot_parent[:, i + 1]], rank[:, i], taken, rng)

        if self.fixed_target_probs is not None:
            index = np.tile(np.arange(self.rows_per_call), -(-batch // self.rows_per_call))[:batch]
            keys[:] = index[:, None] * (nodes + 1) + np.arange(nodes + 1)
            for i in range(nodes):
                ids[:, i] = child(i)
            return TreeDraw(parents, ids, pool_index=index, slot_keys=keys, tables=tables)
        pool = self.prompts() if pool is None else pool
        order, vocab = max(self.target.order, self.draft.order), self.vocab_size
        law_row = self._law_index[0]
        weights = (vocab + 1) ** np.arange(order - 1, -1, -1, dtype=np.int64)
        index = rng.integers(0, pool.shape[0], size=batch)
        contexts = np.empty((batch, nodes + 1, order), dtype=np.int64)
        contexts[:, 0] = last_context_indices(pool, order=order, vocab_size=vocab)[index]
        keys[:, 0] = law_row[contexts[:, 0] @ weights]
        for s in range(1, nodes + 1):
            ids[:, s - 1] = child(s - 1)
            if order:
                u = slot_parent[:, s]
                contexts[:, s, :-1] = contexts[rows_at, u, 1:]
                contexts[:, s, -1] = ids[:, s - 1]
            keys[:, s] = law_row[contexts[:, s] @ weights]
        return TreeDraw(parents, ids, pool_index=index, slot_keys=keys, tables=tables)

    def _draw_dense(self, rng, drafting, law_rows, parents, pool) -> TreeDraw:
        """The rows of every slot from the models themselves (models whose distinct laws do not fit a table)."""
        cast = law_rows if law_rows is not None else (lambda r: r)
        batch, nodes = parents.shape
        vocab = self.vocab_size
        slot_parent = slot_parents(parents)
        rows_at = np.arange(batch)
        ids = np.empty((batch, nodes), dtype=np.int64)
        draft_probs = populated_empty((batch, nodes + 1, vocab))
        target_probs = populated_empty((batch, nodes + 1, vocab))
        removed = np.zeros((batch, nodes + 1, vocab), dtype=bool) if drafting != "iid" else None
        pool = self.prompts() if pool is None else pool
        order = max(self.target.order, self.draft.order)
        index = rng.integers(0, pool.shape[0], size=batch)
        contexts = np.empty((batch, nodes + 1, order), dtype=np.int64)
        contexts[:, 0] = last_context_indices(pool, order=order, vocab_size=vocab)[index]
        for s in range(nodes + 1):
            if s:
                u = slot_parent[:, s]
                ids[:, s - 1] = self._child(drafting, draft_probs[rows_at, u], removed, u, rng)
                if order:
                    contexts[:, s, :-1] = contexts[rows_at, u, 1:]
                    contexts[:, s, -1] = ids[:, s - 1]
            draft_probs[:, s] = cast(self.draft.probs_at(contexts[:, s]))
            target_probs[:, s] = cast(self.target.probs_at(contexts[:, s]))
        return TreeDraw(parents, ids, draft_probs, target_probs, index)

    @staticmethod
    def _child(drafting, draft_rows, removed, parent_slot, rng):
        rows = np.arange(draft_rows.shape[0])
        mask = removed[rows, parent_slot] if removed is not None else None
        token = draft_child(drafting, draft_rows, mask, rng)
        if removed is not None:
            removed[rows, parent_slot, token] = True
        return token

    def slot_depths(self) -> np.ndarray:
        """int64 [S, N+1]: every slot's depth for each shape of the pool."""
        return slot_depths(slot_parents(self.trees))
