"""Exact laws of tree (multi-draft) verification: per row given the tree, and integrated over drafting.

A step on a tree emits the accepted root path's tokens, then one final token. Per row, given the
drafted tree and its probability rows, :func:`tree_step_law` gives ``P(stop slot, final token)``
under a rule (:mod:`._tree_kernels`); :func:`tree_emitted_law` merges slots whose token paths are
equal (duplicated siblings under i.i.d. drafting) into the law of the emitted string.
Integrated over the drafting scheme (:func:`tree_sequence_law`, by enumerating every tree the
scheme can draft) and completed by the target to a fixed length (:func:`tree_completed_law`),
a lossless rule gives exactly the target's joint law (Leviathan et al. 2023, Theorem 3.5,
applied level by level: Miao et al. 2023, Theorem 4.2; Jeon et al. 2024, Theorem 3.1):
:func:`tree_loss_tv` measures how far a rule is from that.
"""

from __future__ import annotations

import itertools

import numpy as np

from .._validation import as_token_array, check_probability_rows
from ..models import last_token_probs, vocab_size_of
from ._enumerate import _prompt_array, joint
from ._outcomes import MAX_OUTCOMES, _offsets, num_step_outcomes
from ._tree_drafting import DRAFTING_SCHEMES, check_drafting, child_probability
from ._tree_kernels import RULES, ThresholdRule, TreeLaws, slot_depths, slot_parents, tree_laws

__all__ = [
    "DRAFTING_SCHEMES",
    "RULES",
    "ThresholdRule",
    "TreeDrafts",
    "TreeLaws",
    "check_rule",
    "check_tree",
    "emitted_codes",
    "enumerate_tree_drafts",
    "tree_accepted_length_law",
    "tree_completed_law",
    "tree_depth",
    "tree_emitted_law",
    "tree_expected_accepted_length",
    "tree_laws_of",
    "tree_loss_tv",
    "tree_sequence_law",
    "tree_step_law",
]

#: Largest number of (tree, slot, token) cells the enumerating oracles build (80 MB of float64).
MAX_ENUMERATION_CELLS = 10_000_000


def check_tree(parents, *, name: str = "parents") -> np.ndarray:
    """``parents`` as int64 [B, N] (a 1-d tree becomes one row) after checking it is a tree.

    Node ``i``'s parent is ``-1`` (a child of the root, the current context) or an earlier node
    ``0 <= parents[i] < i``; the error names the first offending node.
    """
    arr = np.asarray(parents)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise TypeError(f"{name} must be an integer array of parent indices; got dtype {arr.dtype}.")
    arr = arr.astype(np.int64, copy=False)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be [N] or [B, N]; got shape {arr.shape}.")
    bad = (arr < -1) | (arr >= np.arange(arr.shape[1]))
    if bad.any():
        b, i = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"{name}[{b}, {i}] = {int(arr[b, i])}: a node's parent must be -1 (the root) or an earlier "
                         f"node in [0, {i}); number the nodes so that parents come before their children.")
    return arr


def tree_depth(parents) -> int:
    """The deepest node's depth (root children have depth 1; 0 for an empty tree)."""
    parents = check_tree(parents)
    return int(slot_depths(slot_parents(parents)).max()) if parents.size else 0


def check_rule(rule, drafting=None):
    """The rule to use: ``rule`` validated, or the reference rule of ``drafting`` when ``rule`` is None."""
    if rule is None:
        if drafting is None:
            raise ValueError("give a rule, or the drafting scheme whose reference rule to use.")
        return check_drafting(drafting)
    if isinstance(rule, ThresholdRule) or rule in RULES:
        return rule
    raise ValueError(f"rule must be one of {RULES} or a ThresholdRule; got {rule!r}.")


def _check_rows(parents, draft_token_ids, draft_probs, target_probs):
    parents = check_tree(parents)
    draft_probs = check_probability_rows(draft_probs, name="draft_probs")
    target_probs = check_probability_rows(target_probs, name="target_probs")
    if draft_probs.ndim != 3 or target_probs.shape != draft_probs.shape:
        raise ValueError(f"draft_probs and target_probs must both be [B, N+1, V] (row 0 the root, row i+1 after node "
                         f"i); got {draft_probs.shape} and {target_probs.shape}.")
    batch, slots, vocab = target_probs.shape
    ids = as_token_array(draft_token_ids, vocab_size=vocab, name="draft_token_ids", allow_padding=False)
    if ids.shape != (batch, slots - 1):
        raise ValueError(f"draft_token_ids must be [B, N] = {(batch, slots - 1)}; got {ids.shape}.")
    if parents.shape[1] != slots - 1 or parents.shape[0] not in (1, batch):
        raise ValueError(f"parents must be [N] or [B, N] with N = {slots - 1}; got {parents.shape}.")
    return np.broadcast_to(parents, ids.shape), ids, draft_probs, target_probs


def tree_laws_of(parents, draft_token_ids, draft_probs, target_probs, *, rule) -> TreeLaws:
    """The validated :class:`TreeLaws` of each row (reach, stop, final laws by slot) under ``rule``."""
    return tree_laws(*_check_rows(parents, draft_token_ids, draft_probs, target_probs), check_rule(rule))


def tree_step_law(parents, draft_token_ids, draft_probs, target_probs, *, rule) -> np.ndarray:
    """``P(the walk stops at slot s, final token y)`` float64 [B, N+1, V] under ``rule``.

    Slot 0 is the root, slot ``i + 1`` node ``i``. Multi-round rejection sampling
    (:mod:`specdec_check.exact._tree_kernels`; Miao et al. 2023, Algorithm 2): the stop probability
    is the reach probability times the probability that every child is rejected, and the final law
    is the residual after the last child (the target row at a leaf).
    """
    return tree_laws_of(parents, draft_token_ids, draft_probs, target_probs, rule=rule).step_law()


def tree_accepted_length_law(parents, draft_token_ids, draft_probs, target_probs, *, rule) -> np.ndarray:
    """Exact law [B, D+1] of the number of accepted nodes (the stop slot's depth) under ``rule``."""
    return tree_laws_of(parents, draft_token_ids, draft_probs, target_probs, rule=rule).accepted_length_law()


def tree_expected_accepted_length(parents, draft_token_ids, draft_probs, target_probs, *, rule) -> np.ndarray:
    """Expected accepted nodes per row [B] under ``rule`` (tokens per step is one more)."""
    return tree_laws_of(parents, draft_token_ids, draft_probs, target_probs, rule=rule).expected_accepted()


def emitted_codes(laws: TreeLaws, draft_token_ids, vocab_size: int, depth: int) -> np.ndarray:
    """int64 [B, S]: the code (:func:`~specdec_check.exact.encode_emitted` with ``gamma = depth``) of
    each slot's path followed by token 0; add the final token ``y`` for the emitted string's code."""
    batch, slots = laws.depth.shape
    rows = np.arange(batch)
    path = np.zeros((batch, slots), dtype=np.int64)
    for s in range(1, slots):
        path[:, s] = path[rows, laws.slot_parent[:, s]] * vocab_size + draft_token_ids[:, s - 1]
    return _offsets(vocab_size, depth)[laws.depth] + path * vocab_size


def _emitted_from_laws(laws: TreeLaws, ids, vocab: int, depth: int) -> np.ndarray:
    batch, slots = laws.depth.shape
    total = num_step_outcomes(vocab, depth)
    codes = emitted_codes(laws, ids, vocab, depth)[..., None] + np.arange(vocab)  # [B, S, V]
    law = np.zeros((batch, total))
    np.add.at(law, (np.repeat(np.arange(batch), slots * vocab), codes.reshape(-1)), laws.step_law().reshape(-1))
    return law


def tree_emitted_law(parents, draft_token_ids, draft_probs, target_probs, *, rule) -> np.ndarray:
    """Exact law of each row's emitted string [B, num_step_outcomes(V, D)], indexed by
    :func:`~specdec_check.exact.encode_emitted` on outputs of width ``D + 1`` (D the tree's depth).

    Slots with equal token paths (duplicated siblings, possible under i.i.d. drafting) emit the
    same strings: their laws add up.
    """
    parents, ids, draft_probs, target_probs = _check_rows(parents, draft_token_ids, draft_probs, target_probs)
    vocab = target_probs.shape[-1]
    depth = tree_depth(parents)
    if num_step_outcomes(vocab, depth) * ids.shape[0] > MAX_OUTCOMES:
        raise ValueError(f"the emitted law over V={vocab}, depth {depth} has too many outcomes to enumerate for "
                         f"{ids.shape[0]} rows; use tree_step_law() instead.")
    return _emitted_from_laws(tree_laws(parents, ids, draft_probs, target_probs, check_rule(rule)), ids, vocab, depth)


class TreeDrafts:
    """Every tree a scheme can draft from one context, with its probability (:func:`enumerate_tree_drafts`).

    ``ids`` int [M, N], ``weights`` [M] (summing to 1), ``draft_probs`` / ``target_probs`` [M, N+1, V].
    """

    def __init__(self, ids, weights, draft_probs, target_probs):
        self.ids, self.weights, self.draft_probs, self.target_probs = ids, weights, draft_probs, target_probs


def _rows_after(model, prompt, paths):
    """The model's laws after ``prompt + path`` for each row of ``paths`` (int [M, d], -1 padded on the left)."""
    head = np.broadcast_to(prompt, (paths.shape[0], prompt.shape[0]))
    return last_token_probs(model, np.concatenate([head, paths], axis=1))


def enumerate_tree_drafts(target, draft, parents, *, drafting, prompt=None) -> TreeDrafts:
    """Every token assignment of the tree ``parents`` [N] that ``drafting`` can produce after ``prompt``,
    with its probability and its rows (:mod:`specdec_check.exact._tree_drafting`).

    The top-k scheme drafts one tree; the i.i.d. and without-replacement schemes up to ``V**N``
    (assignments of probability zero are dropped).
    """
    drafting = check_drafting(drafting)
    parents = check_tree(parents)
    if parents.shape[0] != 1:
        raise ValueError("enumerate_tree_drafts takes one tree (parents of shape [N]).")
    vocab = vocab_size_of(target)
    if vocab_size_of(draft) != vocab:
        raise ValueError(f"target and draft must share a vocabulary; got V={vocab} and V={vocab_size_of(draft)}.")
    prompt = _prompt_array(prompt, vocab)
    nodes = parents.shape[1]
    count = 1 if drafting == "topk" else vocab**nodes
    if count * (nodes + 1) * vocab > MAX_ENUMERATION_CELLS:
        raise ValueError(f"enumerating the {drafting} drafts of {nodes} nodes over V={vocab} needs {count:,} trees "
                         f"(limit {MAX_ENUMERATION_CELLS:,} cells); use a smaller tree or vocabulary.")
    slot_parent = slot_parents(parents)[0]
    depth = slot_depths(slot_parents(parents))[0]
    ids = np.zeros((count, nodes), dtype=np.int64)
    if drafting != "topk" and nodes:
        ids[:] = np.array(list(itertools.product(range(vocab), repeat=nodes)), dtype=np.int64).reshape(count, nodes)
    weights = np.ones(count)
    draft_probs = np.empty((count, nodes + 1, vocab))
    target_probs = np.empty((count, nodes + 1, vocab))
    removed = np.zeros((count, nodes + 1, vocab), dtype=bool)
    paths = np.full((count, nodes + 1, int(depth.max()) if nodes else 0), -1, dtype=np.int64)  # left-padded paths
    rows = np.arange(count)
    for s in range(nodes + 1):
        if s:
            u = slot_parent[s]
            paths[:, s] = np.roll(paths[:, u], -1, axis=1)
            paths[:, s, -1] = ids[:, s - 1]
        draft_probs[:, s] = _rows_after(draft, prompt, paths[:, s])
        target_probs[:, s] = _rows_after(target, prompt, paths[:, s])
        # the children of slot s are drafted from its draft row, after it is known
        for i in np.flatnonzero(slot_parent == s):
            node = i - 1
            if drafting == "topk":
                left = np.where(removed[:, s], -1.0, draft_probs[:, s])
                ids[:, node] = left.argmax(axis=1)
            weights *= child_probability(drafting, draft_probs[:, s], removed[:, s], ids[:, node])
            removed[rows, s, ids[:, node]] = True
    keep = weights > 0
    return TreeDrafts(ids[keep], weights[keep], draft_probs[keep], target_probs[keep])


def tree_sequence_law(target, draft, parents, *, drafting, rule=None, prompt=None) -> np.ndarray:
    """Exact law of one tree step's emitted string after ``prompt``, trees drafted with ``drafting`` and
    verified with ``rule`` (default: the scheme's reference rule), float64 [num_step_outcomes(V, D)]
    indexed by :func:`~specdec_check.exact.encode_emitted` on outputs of width ``D + 1``.

    Sum over every draftable tree (:func:`enumerate_tree_drafts`) of its probability times its
    emitted law (:func:`tree_emitted_law`).
    """
    rule = check_rule(rule, drafting)
    trees = enumerate_tree_drafts(target, draft, parents, drafting=drafting, prompt=prompt)
    parents = check_tree(parents)
    vocab, depth = vocab_size_of(target), tree_depth(parents)
    if num_step_outcomes(vocab, depth) > MAX_OUTCOMES:
        raise ValueError(f"the emitted strings over V={vocab} and depth {depth} are too many to enumerate.")
    ids = trees.ids
    laws = tree_laws(np.broadcast_to(parents, ids.shape), ids, trees.draft_probs, trees.target_probs, rule)
    codes = emitted_codes(laws, ids, vocab, depth)[..., None] + np.arange(vocab)
    weighted = laws.step_law() * trees.weights[:, None, None]
    return np.bincount(codes.reshape(-1), weights=weighted.reshape(-1), minlength=num_step_outcomes(vocab, depth))


def tree_completed_law(target, draft, parents, *, drafting, rule=None, prompt=None, length=None) -> np.ndarray:
    """Law of one tree step's emitted string completed by exact target sampling to ``length`` tokens
    (default ``D + 1``, the longest emission), float64 of shape [V] * length.

    A lossless rule gives exactly :func:`~specdec_check.exact.joint` ``(target, length, prompt)``
    (rules.md section 1): the testable meaning of "lossless" for one step.
    """
    parents = check_tree(parents)
    depth = tree_depth(parents)
    vocab = vocab_size_of(target)
    length = depth + 1 if length is None else int(length)
    if length < depth + 1:
        raise ValueError(f"length must be at least the longest emission, D + 1 = {depth + 1}; got {length}.")
    if vocab**length > MAX_OUTCOMES:
        raise ValueError(f"the completed law over V={vocab} and length {length} has too many outcomes.")
    emitted = tree_sequence_law(target, draft, parents, drafting=drafting, rule=rule, prompt=prompt)
    offsets = _offsets(vocab, depth)
    prompt_arr = _prompt_array(prompt, vocab)
    law = emitted[offsets[0]: offsets[0] + vocab].copy()  # strings of length 1
    prefixes = np.arange(vocab)[:, None]
    for m in range(1, length):
        nxt = _rows_after(target, prompt_arr, prefixes)  # [V^m, V]
        law = (law[:, None] * nxt).reshape(-1)
        if m <= depth:
            law += emitted[offsets[m]: offsets[m] + vocab ** (m + 1)]
        prefixes = np.concatenate([np.repeat(prefixes, vocab, axis=0),
                                   np.tile(np.arange(vocab), prefixes.shape[0])[:, None]], axis=1)
    return law.reshape((vocab,) * length)


def tree_loss_tv(target, draft, parents, *, drafting, rule=None, prompt=None) -> float:
    """Total variation between a tree step completed by the target (:func:`tree_completed_law`) and the
    target's own law of ``D + 1`` tokens: 0 for a lossless rule on its scheme, the loss otherwise."""
    completed = tree_completed_law(target, draft, parents, drafting=drafting, rule=rule, prompt=prompt)
    exact = joint(target, completed.ndim, prompt)
    return float(0.5 * np.abs(completed - exact).sum())
