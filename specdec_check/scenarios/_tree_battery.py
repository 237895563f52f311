"""The default tree-verifier battery: chains, stars, EAGLE-like static trees, random trees, V = 3 to 32,000.

Every scenario drafts its trees with the scheme under test. Scenarios a scheme cannot draft
(without replacement needs as many tokens of positive draft probability as a node has
children) are left out of that scheme's battery; the duplicated-siblings scenario is the i.i.d.
scheme's own (only independent drafts repeat a token among siblings).
"""

from __future__ import annotations

import functools

import numpy as np

from .._settings import DRAFTING_SCHEMES
from ..exact._tree_drafting import check_drafting
from ..models import HashedMarkovModel, mix
from ._battery import markov_pair
from ._tree import TreeScenario, chain_tree, eagle_like_tree, random_tree, star_tree

__all__ = ["EAGLE_26", "EAGLE_60", "default_tree_battery"]

#: A 26-node static tree of depth 5, branching 4 at the root and fewer for lower-ranked nodes (the
#: shape of EAGLE's static trees: the better-ranked continuation gets more children).
EAGLE_26 = eagle_like_tree([[4], [3, 2, 1, 1], [2, 2, 1, 1, 1, 1], [2, 1, 1, 1], [1, 1]])
#: A 60-node static tree of depth 6, branching 1 to 4.
EAGLE_60 = eagle_like_tree([[4], [4, 3, 2, 1], [3, 3, 2, 2, 2, 1, 1, 1, 1, 1], [2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
                            [1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])


def _random_shapes(count: int, nodes: int, *, seed: int, max_branching: int = 3, max_depth: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([random_tree(rng, nodes, max_branching=max_branching, max_depth=max_depth) for _ in range(count)])


def default_tree_battery(drafting: str = "topk") -> list:
    """The checker's default tree scenarios for ``drafting`` (see the module docstring).

    The scenario objects are built once per process and shared by the schemes (they are immutable
    and cache their law tables), so a scenario taken from this list is recognised as a default one.
    """
    drafting = check_drafting(drafting)
    return [scenario for scenario, schemes in _tree_battery() if drafting in schemes]


#: Rows per call of the large-vocabulary scenario: 16 rows of 3 slots hand over 3 M cells per call.
LARGE_ROWS_PER_CALL = 16


@functools.lru_cache(maxsize=1)
def _tree_battery() -> tuple:
    """``((scenario, schemes it belongs to), ...)``."""
    every = DRAFTING_SCHEMES
    large_target = HashedMarkovModel.random(32_000, num_prototypes=8, seed=1)
    large_draft = mix(large_target, HashedMarkovModel.random(32_000, num_prototypes=8, seed=2), 0.6)
    spec = [
        # name, kind, V, order, trees, rows per call, description of the shape, schemes
        ("chain-4", "low-acceptance", 7, 1, chain_tree(4), 64, "a chain of 4 (a chain verifier's drafts)", every),
        ("star-3-enumerable", "low-acceptance", 5, 1, star_tree(3), 32, "3 children of the root", every),
        ("small-tree-enumerable", "opposite-ranking", 4, 1, np.array([-1, -1, 0, 1]), 32, "4 nodes, depth 2", every),
        ("star-8", "opposite-ranking", 16, 1, star_tree(8), 64, "8 children of the root", every),
        ("eagle-26", "high-acceptance", 33, 2, EAGLE_26, 64, "EAGLE-like static tree, 26 nodes, depth 5", every),
        ("eagle-60", "low-acceptance", 33, 1, EAGLE_60, 32, "EAGLE-like static tree, 60 nodes, depth 6", every),
        ("random-trees", "low-acceptance", 11, 1, _random_shapes(8, 12, seed=7), 64,
         "8 random shapes of 12 nodes, branching <= 3, depth <= 5, one per row", every),
        ("target-equals-draft", "target-equals-draft", 33, 1, eagle_like_tree([[3], [2, 1, 1], [1, 1]]), 32,
         "target == draft, 8 nodes", every),
        ("disjoint-supports", "disjoint-supports", 16, 1, np.array([-1, -1, 0, 0, 1]), 32, "5 nodes, depth 2", every),
        ("draft-zeros", "draft-zeros", 16, 2, np.array([-1, -1, 0, 2]), 16, "4 nodes, depth 3", every),
        ("peaked-vs-tail-heavy", "peaked-vs-tail-heavy", 1000, 1, eagle_like_tree([[3], [2, 1, 1], [1, 1]]), 64,
         "V=1000, 8 nodes, depth 3", every),
        # without replacement cannot draft siblings from a one-hot row
        ("one-hot-draft", "one-hot-draft", 7, 1, np.array([-1, -1, 0, 1, 0]), 32,
         "one-hot draft, 5 nodes: i.i.d. siblings all repeat one token", ("iid", "topk")),
        # only independent drafts repeat a token among siblings
        ("duplicated-siblings", "low-acceptance", 3, 1, np.array([-1, -1, -1, -1, 0, 0, 1]), 64,
         "V=3, 4 children of the root: siblings repeat tokens", ("iid",)),
    ]
    battery = []
    for i, (name, kind, vocab, order, trees, rows, shape, schemes) in enumerate(spec):
        target, draft = markov_pair(kind, vocab_size=vocab, order=order, seed=100 + i)
        battery.append((TreeScenario(name, target, draft, trees, rows, seed=i,
                                     description=f"{kind}, V={vocab}, order {order}; {shape}"), schemes))
    # Two nodes per tree (a star of 2 or a chain of 2, one per row): 6 rows of V = 32,000 per row, so the
    # ~10^4 rows default mode needs fit its cap on the cells a scenario hands over (max_law_cells).
    battery.append((TreeScenario("large-vocabulary", large_target, large_draft, np.array([[-1, -1], [-1, 0]]),
                                 LARGE_ROWS_PER_CALL, seed=99,
                                 description="hashed order-1 Zipf model, V=32,000; 2 nodes: a star of 2 or a chain "
                                             "of 2, one per row"), every))
    return tuple(battery)
