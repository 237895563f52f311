"""Draft trees and ready-to-call tree-verifier cases.

:func:`trees` draws ``parents`` arrays (node ``i``'s parent is -1, the root, or an earlier node)
that shrink towards fewer nodes and towards a star (every node a child of the root); the
branching and depth bounds are respected by construction, never by filtering.
:func:`tree_cases` adds fixed probability rows per slot (row 0 the root, row ``i + 1`` after node
``i``) for a :class:`~specdec_check.scenarios.TreeScenario` built with ``from_rows``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from ._validation import check_int, order_check
from ._vectors import _frozen, probability_vectors

__all__ = ["TreeCase", "tree_cases", "trees"]


#: Largest raw index per node: a node attaches to the ``index % k``-th of the ``k`` slots it may attach to.
_CHOICE = 1 << 16


@st.composite
def _trees(draw, min_nodes, max_nodes, max_branching, max_depth):
    # Each node draws the depth it wants (shrinking to 1: a child of the root) and an index among the
    # slots one level up with room left (shrinking to 0: the first). Deleting a node leaves the other
    # nodes' choices meaning the same thing, so examples shrink by deleting nodes anywhere.
    choices = draw(st.lists(st.tuples(st.integers(1, max_depth), st.integers(0, _CHOICE)), min_size=min_nodes,
                            max_size=max_nodes))
    parents, depth, kids = [], [0], [0]
    for want, index in choices:
        room = [s for s in range(len(depth)) if kids[s] < max_branching and depth[s] < max_depth]
        if not room:  # the bounds are full: a larger tree does not fit
            break
        up = [depth[s] for s in room if depth[s] <= want - 1]
        level = max(up) if up else min(depth[s] for s in room)  # the wanted level, else the nearest one with room
        at = [s for s in room if depth[s] == level]
        s = at[index % len(at)]
        parents.append(s - 1)
        kids[s] += 1
        depth.append(depth[s] + 1)
        kids.append(0)
    out = np.asarray(parents, dtype=np.int64)
    out.setflags(write=False)
    return out


def trees(*, min_nodes: int = 1, max_nodes: int = 12, max_branching: int = 4, max_depth: int = 6):
    """``parents`` int64 [N] of a draft tree with ``min_nodes <= N <= max_nodes`` nodes, at most
    ``max_branching`` children per node (the root included) and depth at most ``max_depth``.

    Examples shrink towards fewer nodes, and each node towards the root (a star); a node deleted by the
    shrinker leaves the others attached as before (each names a depth and a slot of that level). When the bounds
    hold fewer than ``max_nodes`` nodes (``max_branching`` 1 and a small depth), the tree is as large
    as they allow.
    """
    check_int(max_branching, "max_branching", floor=1)
    check_int(max_depth, "max_depth", floor=1)
    order_check("nodes", 1, min_nodes, max_nodes)
    return _trees(min_nodes, max_nodes, max_branching, max_depth)


@dataclass(frozen=True, eq=False)
class TreeCase:
    """A tree and fixed rows for one tree-verifier example: ``parents`` [N], ``target_probs`` and
    ``draft_probs`` float64 [N+1, V]."""

    parents: np.ndarray = field(repr=False)
    target_probs: np.ndarray = field(repr=False)
    draft_probs: np.ndarray = field(repr=False)

    @property
    def vocab_size(self) -> int:
        return int(self.target_probs.shape[-1])

    @property
    def nodes(self) -> int:
        return int(self.parents.shape[0])

    def __repr__(self) -> str:
        return (f"TreeCase(parents={self.parents.tolist()}, target_probs=np.array({self.target_probs.tolist()}), "
                f"draft_probs=np.array({self.draft_probs.tolist()}))")

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


@st.composite
def _tree_cases(draw, max_vocab, max_nodes, max_branching, max_depth, full_support):
    parents = draw(trees(max_nodes=max_nodes, max_branching=max_branching, max_depth=max_depth))
    branching = int(np.bincount(parents + 1).max())
    vocab = draw(st.integers(max(2, branching), max(max_vocab, branching)))  # top-k needs V >= k
    support = {"min_support": vocab} if full_support else {}
    rows = st.lists(probability_vectors(vocab_size=vocab, **support), min_size=parents.size + 1,
                    max_size=parents.size + 1)
    return TreeCase(parents, _frozen(np.stack(draw(rows))), _frozen(np.stack(draw(rows))))


def tree_cases(*, max_vocab: int = 5, max_nodes: int = 6, max_branching: int = 3, max_depth: int = 3,
               full_support: bool = False):
    """A :class:`TreeCase`: a tree from :func:`trees` and one target and one draft row per slot over
    ``V <= max_vocab`` tokens (at least 2 and the largest branching: top-k drafts need V >= k).
    ``full_support`` gives every row every token (drafting without replacement needs as many tokens
    of positive draft probability as a node has children)."""
    check_int(max_vocab, "max_vocab", floor=2)
    check_int(max_nodes, "max_nodes", floor=1)
    return _tree_cases(max_vocab, max_nodes, max_branching, max_depth, full_support)
