"""A draw of trees with the exact laws of one tree step given them, and the outputs parsed against them.

The laws come from :func:`specdec_check.exact._tree_kernels.tree_laws` under the declared rule:
per slot, the probability of reaching it, of stopping there, and the final token's law there.
Slots whose token paths are equal (duplicated siblings under i.i.d. drafting) emit the same
strings, so every test works on *classes* of slots: ``cls[b, s]`` is the first slot with slot
``s``'s token path. A row's output names a class path (the accepted tokens) and a final token.

The per-row tests are randomized PITs (Brockwell 2007) of:

- the first emitted token against target row 0 (fresh drafts only: integrated over drafting
  the first token of any lossless rule is the target's);
- the accepted length ``K`` against its law given the tree;
- the final token against the law of the stop class;
- each position ``t >= 1`` of the emitted sequence, followed by an end symbol, against its exact
  conditional law given the sequence so far (the Rosenblatt transform: a position is tested
  when the prefix is an accepted path, which depends on the past only, so each position's PIT
  values are exactly uniform under the null).
"""

from __future__ import annotations


import numpy as np

from ..._tables import exclusive_cumsum
from ...exact._tree_keyed import tree_laws_keyed
from ...exact._tree_kernels import tree_laws
from ..chain.block import pit_from_bounds
from .contract import ParsedTree, check_tree_output, token_classes

__all__ = ["TreeBlock", "collision_probs"]


class TreeBlock:
    """A draw and the exact laws of one tree step given it under ``rule`` (see the module docstring).

    The laws are keyed (:func:`~specdec_check.exact._tree_keyed.tree_laws_keyed`): each slot's final
    law is a row of ``final_rows`` (``final_index`` [B, S]), shared by the slots and calls whose residual
    is the same, so a block costs O(B N) plus one O(V) row per distinct residual. ``states`` (the
    :class:`~specdec_check.exact._tree_keyed.StateTable` of an earlier block on the same tables) lets
    blocks of one scenario share their residuals. ``window(rows)`` gives the block of a slice of rows
    (a pooled draw serves several calls).
    """

    def __init__(self, draw, rule, *, laws=None, states=None):
        self.draw, self.rule = draw, rule
        ids = draw.draft_token_ids
        batch, nodes = ids.shape
        tables = draw.tables
        self.batch, self.slots, self.vocab = batch, nodes + 1, tables.vocab
        self.uses = 0
        self.states = None
        if laws is None and isinstance(rule, str):
            laws, self.states = tree_laws_keyed(draw.parents, ids, draw.slot_keys, tables.target, tables.draft, rule,
                                                target_below=tables.target_below, states=states)
        elif laws is None:  # a ThresholdRule (the exact oracles' relaxations): the dense kernel
            laws = tree_laws(draw.parents, ids, draw.draft_probs, draw.target_probs, rule)
        self.laws = laws
        self.rows = np.arange(batch)
        self.tokens = np.concatenate([np.full((batch, 1), -1, dtype=np.int64), ids], axis=1)
        self.cls = token_classes(laws.slot_parent, self.tokens)
        self.parent_cls = np.full((batch, self.slots), -1, dtype=np.int64)
        self.parent_cls[:, 1:] = self.cls[self.rows[:, None], laws.slot_parent[:, 1:]]
        self.width = int(laws.depth.max()) + 1
        self.reach, self.stop, self.depth = laws.reach, laws.stop, laws.depth
        self.final_rows, self.final_index = laws.final_rows, laws.final_index
        count = laws.accepted_length_law()
        self.count_law = count
        self.count_below = exclusive_cumsum(count)
        self.first_row = draw.slot_keys[:, 0]  # the root's row of the target table
        #: P(at least one node accepted): the efficiency test's per-row success probability.
        self.accept_any = 1.0 - laws.stop[:, 0]
        self.expected_accepted = float((laws.stop * laws.depth).sum())

    # -- parsing ------------------------------------------------------------------------------------
    def parse(self, out):
        """:func:`check_tree_output` of ``out`` against this block's trees."""
        return check_tree_output(out, self.draw.parents, self.draw.draft_token_ids, self.vocab,
                                 classes=(self.cls, self.parent_cls, self.tokens))

    def target_at(self, rows, slots, tokens) -> np.ndarray:
        """The target probability of ``tokens`` at ``slots`` of ``rows`` (elementwise)."""
        return self.draw.tables.target[self.draw.slot_keys[rows, slots], tokens]

    # -- class sums --------------------------------------------------------------------------------
    def class_final(self, cls, token, rows=None):
        """``(lower, mass, total)`` of ``token`` under ``sum_{v in class} stop_v final_v`` (the joint
        probability of stopping in class ``cls`` and emitting ``token``), for ``rows`` (default all)."""
        rows = self.rows if rows is None else rows
        member = self.cls[rows] == cls[:, None]
        at, slot = np.nonzero(member)  # the (row, slot) pairs of each row's class: usually one per row
        weight = self.stop[rows[at], slot]
        index = self.final_index[rows[at], slot]
        tok = token.clip(min=0)[at]
        final = self.final_rows
        n = rows.size
        return (np.bincount(at, weight * final.below_at(index, tok), minlength=n),
                np.bincount(at, weight * final.at(index, tok), minlength=n),
                np.bincount(at, weight * final.cumulative_total(index), minlength=n))

    def child_reach(self, cls, token, rows=None):
        """``(below, at, all)``: reach summed over the children of class ``cls`` whose token is below,
        equal to, and anything of ``token``, for ``rows`` (default all)."""
        rows = self.rows if rows is None else rows
        reach = np.where(self.parent_cls[rows] == cls[:, None], self.reach[rows], 0.0)
        tokens = self.tokens[rows]
        return ((reach * (tokens < token[:, None])).sum(axis=1), (reach * (tokens == token[:, None])).sum(axis=1),
                reach.sum(axis=1))

    def outcome_probability(self, parsed: ParsedTree):
        """Probability [B] of each row's emitted string under the rule (0: an impossible event)."""
        return self.class_final(parsed.stop, parsed.final)[1]

    # -- randomized PITs --------------------------------------------------------------------------
    def pit_first(self, out, uniforms):
        first = out[:, 0]
        tables = self.draw.tables
        mass = tables.target[self.first_row, first]
        below = tables.target_below
        return pit_from_bounds(below[self.first_row, first], mass, below[self.first_row, self.vocab], uniforms, first)

    def pit_length(self, parsed, uniforms):
        k = parsed.accepted
        return pit_from_bounds(self.count_below[self.rows, k], self.count_law[self.rows, k], self.count_below[:, -1],
                               uniforms, k)

    def pit_final(self, parsed, uniforms):
        lower, mass, total = self.class_final(parsed.stop, parsed.final)
        return pit_from_bounds(lower, mass, total, uniforms, parsed.final)

    def pit_position(self, out, parsed, t: int, uniforms_for):
        """PIT values of position ``t >= 1`` (token, or the end symbol after the last token) for the rows
        whose prefix of ``t`` tokens is an accepted path: ``(rows, u)``."""
        length = parsed.length
        prefix = np.where(t <= length - 1, parsed.classes[:, min(t, parsed.classes.shape[1] - 1)], -1)
        prefix = np.where(t == length, parsed.extended, prefix)
        rows = np.flatnonzero(prefix >= 0)
        if not rows.size:
            return rows, np.zeros(0)
        c = prefix[rows]
        before = parsed.classes[rows, t - 1]  # the class of the first t - 1 tokens
        ended = t == length[rows]  # the observed symbol is the end
        token = np.where(ended, 0, out[rows, t])
        below_children, at_children, all_children = self.child_reach(c, token, rows)
        f_lower, f_mass, f_total = self.class_final(c, token, rows)
        _, end_mass, _ = self.class_final(before, out[rows, t - 1], rows)  # P(the emission is exactly the prefix)
        tokens_total = all_children + f_total
        total = tokens_total + end_mass
        lower = np.where(ended, tokens_total, below_children + f_lower)
        mass = np.where(ended, end_mass, at_children + f_mass)
        symbol = np.where(ended, self.vocab, token)
        return rows, pit_from_bounds(lower, mass, total, uniforms_for(rows.size), symbol)

    # -- windows -----------------------------------------------------------------------------------
    _ROW_FIELDS = ("reach", "stop", "depth", "final_index", "count_law", "count_below", "first_row", "accept_any",
                   "tokens", "cls", "parent_cls")

    def window(self, rows) -> "TreeBlock":
        """This block restricted to ``rows`` (a slice or an index array): the laws are shared, not recomputed."""
        view = object.__new__(TreeBlock)
        view.__dict__.update(self.__dict__)
        for name in self._ROW_FIELDS:
            setattr(view, name, getattr(self, name)[rows])
        view.draw = self.draw.head(rows)
        view.batch = view.draw.rows
        view.rows = np.arange(view.batch)
        view.uses = 0
        view.width = int(view.depth.max()) + 1
        view.expected_accepted = float((view.stop * view.depth).sum())
        return view


def collision_probs(block: TreeBlock) -> np.ndarray:
    """Probability [B] that two independent steps on the same row emit the same string:
    ``sum over (class, y) of P(stop in class, y)^2`` (slots of one class emit the same strings)."""
    probs = (block.stop**2 * block.final_rows.square(block.final_index)).sum(axis=1)
    merged = np.flatnonzero((block.cls != np.arange(block.slots)).any(axis=1))
    for b in merged:  # duplicated siblings (i.i.d. drafts over small vocabularies): add the cross terms
        law = np.zeros((block.slots, block.vocab))
        np.add.at(law, block.cls[b], block.stop[b, :, None] * block.final_rows.gather(block.final_index[b]))
        probs[b] = (law**2).sum()
    return probs
