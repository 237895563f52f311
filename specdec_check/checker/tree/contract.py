"""The tree verifier's output contract, and the emissions of probability zero under its rule.

A row's output names a class path (the accepted tokens) and a final token: :func:`check_tree_output`
parses it against the drawn trees (slots whose token paths are equal form one class: duplicated
siblings under i.i.d. drafting emit the same strings). :func:`impossible_rows` finds the rows whose
emission has probability zero under the scheme's reference rule, or under every lossless rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EVIDENCE_ROWS", "ParsedTree", "check_tree_output", "describe_impossible", "impossible_rows",
           "token_classes"]

#: Rows of a parsed output named in a contract finding (and in an impossible event's evidence).
EVIDENCE_ROWS = 10


def token_classes(slot_parent: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """int64 [B, S]: for each slot the first slot with the same token path (slot 0, the root, is its own).

    ``tokens`` [B, S] holds each slot's token (-1 at the root). Two slots share a path iff their
    parents share one and their tokens are equal; only duplicated siblings start a merge.
    """
    batch, slots = tokens.shape
    rows = np.arange(batch)
    cls = np.broadcast_to(np.arange(slots), (batch, slots)).copy()
    parent_cls = np.full((batch, slots), -1, dtype=np.int64)
    for s in range(1, slots):
        parent_cls[:, s] = cls[rows, slot_parent[:, s]]
        same = (parent_cls[:, 1:s] == parent_cls[:, s, None]) & (tokens[:, 1:s] == tokens[:, s, None])
        if same.any():
            hit = same.any(axis=1)
            cls[hit, s] = cls[hit, 1 + same[hit].argmax(axis=1)]
    return cls


@dataclass
class ParsedTree:
    """A well-formed output decoded against its trees.

    ``length`` [B] tokens emitted (accepted + 1); ``classes`` [B, W]: the class after ``d`` accepted
    tokens (``classes[:, 0]`` the root, -1 past ``length - 1``); ``stop`` [B] the class the walk
    stopped at; ``final`` [B] the final token; ``extended`` [B]: the class of the accepted path
    followed by the final token when that is also a path of the tree, else -1.
    """

    length: np.ndarray
    classes: np.ndarray
    stop: np.ndarray
    final: np.ndarray
    extended: np.ndarray

    @property
    def accepted(self) -> np.ndarray:
        return self.length - 1


def _child_class(cls, parent_cls, tokens, current, token):
    """The class of the child of class ``current`` with token ``token`` per row, or -1."""
    match = (parent_cls[:, 1:] == current[:, None]) & (tokens[:, 1:] == token[:, None])
    found = match.any(axis=1)
    slot = 1 + match.argmax(axis=1)
    return np.where(found, cls[np.arange(cls.shape[0]), slot], -1)


def _layout_problem(out, batch: int, width: int, vocab_size: int):
    """``(message, evidence)`` where ``out`` is not [B, depth + 1] integer token ids in range, one or more per
    row followed by -1 padding; else None."""
    if not isinstance(out, np.ndarray) or out.ndim != 2 or out.shape != (batch, width):
        shape = getattr(out, "shape", None)
        return (f"output shape {shape} != [B, depth + 1] = {(batch, width)} (depth = the deepest node's depth in the "
                "batch: the accepted path's tokens, the final token, then -1 padding)", {"shape": shape})
    if not (np.issubdtype(out.dtype, np.integer) or out.size == 0):
        return f"output dtype {out.dtype} is not an integer type", {"dtype": str(out.dtype)}
    out = out.astype(np.int64, copy=False)
    bad = (out < -1) | (out >= vocab_size)
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])
        return (f"token {int(out[row, col])} at row {row}, position {col} is not in [0, {vocab_size}) or -1 padding",
                {"row": row, "output": out[row].tolist()})
    real = out >= 0
    length = real.sum(axis=1)
    holes = (real != (np.arange(width) < length[:, None])).any(axis=1) | (length == 0)
    if holes.any():
        row = int(np.flatnonzero(holes)[0])
        return (f"row {row} is not one or more tokens followed by -1 padding: {out[row].tolist()}",
                {"row": row, "output": out[row].tolist(), "rows": np.flatnonzero(holes)[:EVIDENCE_ROWS].tolist()})
    return None


def check_tree_output(out, parents, draft_token_ids, vocab_size: int, classes=None):
    """``(problem, parsed)``: ``problem`` is None or ``(message, evidence)`` naming the first contract
    violation of ``out`` (shape [B, depth + 1], integer, ids in range, -1 padding after at least one
    token, the tokens before the last a root path of the row's tree); ``parsed`` a :class:`ParsedTree`.

    ``classes``, when the caller has them, is ``(cls, parent_cls, tokens)`` of :class:`TreeBlock`.
    """
    from ...exact._tree_kernels import slot_depths, slot_parents

    batch, nodes = draft_token_ids.shape
    slot_parent = slot_parents(parents)
    if classes is None:
        tokens = np.concatenate([np.full((batch, 1), -1), draft_token_ids], axis=1)
        cls = token_classes(slot_parent, tokens)
        parent_cls = np.concatenate([np.full((batch, 1), -1), cls[np.arange(batch)[:, None], slot_parent[:, 1:]]],
                                    axis=1)
    else:
        cls, parent_cls, tokens = classes
    width = int(slot_depths(slot_parent).max()) + 1
    problem = _layout_problem(out, batch, width, vocab_size)
    if problem is not None:
        return problem, None
    out = out.astype(np.int64, copy=False)
    length = (out >= 0).sum(axis=1)
    path = np.full((batch, width), -1, dtype=np.int64)
    path[:, 0] = 0
    current = np.zeros(batch, dtype=np.int64)
    for d in range(width - 1):
        active = d < length - 1
        if not active.any():
            break
        nxt = _child_class(cls, parent_cls, tokens, current, out[:, d])
        lost = active & (nxt < 0)
        if lost.any():
            row = int(np.flatnonzero(lost)[0])
            return (f"row {row}: the emitted tokens {out[row, :length[row]].tolist()} do not start with a root path "
                    f"of its tree followed by one token (token {int(out[row, d])} at depth {d + 1} is not a child of "
                    f"the path before it; drafts {draft_token_ids[row].tolist()}, parents {parents[row].tolist()})",
                    {"row": row, "output": out[row].tolist(), "drafts": draft_token_ids[row].tolist(),
                     "parents": parents[row].tolist(), "rows": np.flatnonzero(lost)[:EVIDENCE_ROWS].tolist()}), None
        current = np.where(active, nxt, current)
        path[:, d + 1] = np.where(active, nxt, -1)
    final = out[np.arange(batch), length - 1]
    extended = _child_class(cls, parent_cls, tokens, current, final)
    return None, ParsedTree(length=length, classes=path, stop=current, final=final, extended=extended)


def describe_impossible(block, out, parsed, row: int, tolerance: float) -> str:
    """Why row ``row``'s emission has probability zero under the rule (the first reason found)."""
    length = int(parsed.length[row])
    for d in range(1, length):
        parent, token = int(parsed.classes[row, d - 1]), int(out[row, d - 1])
        if block.target_at(row, parent, token) <= 0:
            return f"accepted token {token} at depth {d}, which the target gives probability zero"
    if tolerance:
        return f"emitted final token {int(parsed.final[row])}, which the target gives probability zero there"
    for d in range(1, length):
        cls = int(parsed.classes[row, d])
        if block.reach[row][block.cls[row] == cls].sum() <= 0:
            return (f"accepted the node at depth {d} (token {int(out[row, d - 1])}), which the rule reaches with "
                    "probability zero (an earlier sibling it accepts with probability 1 was rejected?)")
    stop = int(parsed.stop[row])
    if block.stop[row][block.cls[row] == stop].sum() <= 0:
        return ("stopped after rejecting every child of a node although the rule accepts one of them with "
                "probability 1")
    leaf = not (block.parent_cls[row] == stop).any()
    if leaf:
        return f"emitted a bonus token {int(parsed.final[row])} the leaf's target row gives probability zero"
    return (f"emitted final token {int(parsed.final[row])} outside the support of the residual after the rejected "
            "children (e.g. a rejected child's token, or a token the residual max(0, r - q) removes)")


def target_zero(block, out, parsed) -> np.ndarray:
    """bool [B]: rows that emitted a token of target probability zero after its prefix (an accepted token at
    its parent's row, or the final token at the stop slot's row): impossible under every lossless rule."""
    rows = np.arange(out.shape[0])
    bad = block.target_at(rows, parsed.stop, parsed.final) <= 0
    for d in range(1, out.shape[1]):
        active = d < parsed.length
        parent = np.where(active, parsed.classes[:, d - 1], 0)
        bad |= active & (block.target_at(rows, parent, out[:, d - 1].clip(min=0)) <= 0)
    return bad


def impossible_rows(block, out, parsed, *, tolerance: float, rule: str) -> tuple:
    """``(bad, universal)``: bool [B] masks of the rows whose emission has probability zero. ``universal``:
    an accepted or final token the target row gives probability zero (impossible under every lossless rule).
    ``bad``: under ``rule="any"`` the universal rows; under the standard rule also, with tolerance 0 (float64
    laws of exactly what the sampler saw), any emission of probability zero under the scheme's reference rule
    (with a positive tolerance, where the sampler's arithmetic may move an acceptance across 1, only the
    universal ones)."""
    universal = target_zero(block, out, parsed)
    standard = universal if tolerance else universal | ~(block.outcome_probability(parsed) > 0)
    return (universal if rule == "any" else standard), universal, standard
