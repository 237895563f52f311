"""Buggy tree verifiers: each differs from a reference ``numpy_verify_tree_*`` in one place.

All keep the tree-verifier contract (keyword-only ``parents``, ``draft_token_ids``, ``draft_probs``,
``target_probs``, ``generator``; int64 [B, depth + 1] with -1 padding) and use only ``generator``.
:func:`_walk` is the reference walk (multi-round rejection sampling, one node at a time, as
:mod:`specdec_check.samplers._tree_numpy`) with one hook per place a bug can sit.
Notation: p = target, q = draft, r the residual of the node the walk is at.
"""

from __future__ import annotations

import numpy as np

from ..samplers._tree_numpy import verify_tree_output_width

__all__ = [
    "tree_bonus_from_parent_row",
    "tree_final_from_parent_row",
    "tree_final_from_root_row",
    "tree_iid_rule_on_topk_drafts",
    "tree_iid_rule_on_without_replacement",
    "tree_residual_not_updated",
    "tree_sibling_law_not_renormalised",
]


def _normalise(rows):
    total = rows.sum(axis=1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)


def _ratio(residual_at, proposal_at):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(proposal_at > 0, residual_at / np.where(proposal_at > 0, proposal_at, 1.0),
                        np.where(residual_at > 0, np.inf, 0.0))


def _walk(parents, draft_token_ids, draft_probs, target_probs, generator, *, rule, renormalise=True,
          update_residual=True, final_row=None, bonus_row=None):
    """The reference walk under ``rule`` (one of :data:`specdec_check._settings.DRAFTING_SCHEMES`) with hooks:

    - ``renormalise``: the without-replacement proposal is renormalised after removing siblings;
    - ``update_residual``: the residual is updated after a rejected child (else every child is tested
      against the node's target row, and the final token comes from ``norm(max(p - q, 0))``);
    - ``final_row(parent_slot, slot) -> slot``: which slot's target row the final token comes from after
      the children of a non-root node were all rejected (default: the node's own residual);
    - ``bonus_row(parent_slot, slot) -> slot``: which slot's target row the bonus token at a leaf comes
      from (default: the leaf's own).
    """
    parents = np.asarray(parents, dtype=np.int64)
    ids = np.asarray(draft_token_ids, dtype=np.int64)
    draft = np.asarray(draft_probs, dtype=np.float64)
    target = np.asarray(target_probs, dtype=np.float64)
    if not (np.isfinite(draft).all() and np.isfinite(target).all()):
        raise ValueError("draft_probs or target_probs holds a NaN or infinite probability.")
    batch, nodes = ids.shape
    coins = generator.random((batch, nodes + 1))
    out = np.full((batch, verify_tree_output_width(parents)), -1, dtype=np.int64)
    current = np.zeros(batch, dtype=np.int64)
    emitted = np.zeros(batch, dtype=np.int64)
    tried = np.zeros(batch, dtype=bool)  # whether the current node rejected a child
    residual = target[:, 0].copy()
    left = draft[:, 0].copy()
    for i in range(nodes):
        rows = np.flatnonzero(parents[:, i] + 1 == current)
        if not rows.size:
            continue
        x, at = ids[rows, i], np.arange(rows.size)
        r = residual[rows] if update_residual else target[rows, current[rows]]
        if rule == "topk":
            q = np.zeros_like(r)
            q[at, x] = 1.0
        elif rule == "iid":
            q = draft[rows, current[rows]]
        else:
            q = _normalise(left[rows]) if renormalise else left[rows]
        accepted = coins[rows, i] < _ratio(r[at, x], q[at, x])
        hit, miss = rows[accepted], rows[~accepted]
        out[hit, emitted[hit]] = x[accepted]
        emitted[hit] += 1
        current[hit] = i + 1
        tried[hit] = False
        tried[miss] = True
        residual[hit] = target[hit, i + 1]
        left[hit] = draft[hit, i + 1]
        left[miss, x[~accepted]] = 0.0
        if update_residual:
            residual[miss] = _normalise(np.maximum(r[~accepted] - q[~accepted], 0.0))
        else:
            residual[miss] = _normalise(np.maximum(target[miss, current[miss]] - q[~accepted], 0.0))
    rows = np.arange(batch)
    law = residual.copy()
    parent_slot = np.where(current > 0, parents[rows, np.maximum(current - 1, 0)] + 1, 0)
    if final_row is not None:
        pick = tried & (current > 0)
        law[pick] = target[rows[pick], final_row(parent_slot[pick], current[pick])]
    if bonus_row is not None:
        pick = ~tried & (current > 0)
        law[pick] = target[rows[pick], bonus_row(parent_slot[pick], current[pick])]
    cdf = np.cumsum(law, axis=1)
    token = np.count_nonzero(cdf <= (coins[:, nodes] * cdf[:, -1])[:, None], axis=1)
    over = token >= law.shape[1]
    if over.any():
        positive = law[over] > 0
        token[over] = law.shape[1] - 1 - positive[:, ::-1].argmax(axis=1)
    out[rows, emitted] = token
    return out


# --- the residual ---------------------------------------------------------------------------------

def tree_residual_not_updated(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """i.i.d. drafts: every sibling is tested against the node's target row p, not the residual left by the
    rejected siblings, and the final token comes from ``norm(max(p - q, 0))``.

    Source: class of bug: SpecInfer's multi-step speculative sampling (Miao et al. 2023, Algorithm 2) updates
    the residual after every rejected sibling (llama.cpp PR #5625 implements that update); no specific report.
    """
    return _walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule="iid", update_residual=False)


def tree_iid_rule_on_without_replacement(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """Drafts drawn without replacement verified with the i.i.d. rule (``q_i = q`` for every sibling).

    Source: Jeon et al. 2024 (recursive speculative decoding): siblings drawn without replacement need the
    proposal with the earlier siblings removed and renormalised; EAGLE-1's ``evaluate_posterior`` (SafeAILab/EAGLE
    at 08dc06cc) masks them. A small loss: the drafts are distinct either way.
    """
    return _walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule="iid")


def tree_sibling_law_not_renormalised(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """Without replacement: the earlier siblings are removed from the proposal, but it is not renormalised.

    Source: class of bug (Jeon et al. 2024 renormalise ``q`` after removing the drafted siblings). The acceptance
    ``r(x) / q(x)`` and the residual ``max(r - q, 0)`` then equal the i.i.d. rule's (a rejected sibling's residual
    is already zero), so its law is :func:`tree_iid_rule_on_without_replacement`'s: one more implementation of
    the same loss.
    """
    return _walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule="without_replacement",
                 renormalise=False)


def tree_iid_rule_on_topk_drafts(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """Deterministic top-k drafts verified with the i.i.d. rule ``min(1, r(x) / q(x))`` on the draft's soft law.

    Source: the open question of SafeAILab/EAGLE issues #221, #183, #110, #74 (is top-k tree drafting
    lossless?): with the one-hot rule it is; with this rule it is not. EAGLE #110's example (p = q, top-2
    drafts "am" 0.51, "have" 0.49) shows why: ``min(1, p/q) = 1`` accepts "am" every time. EAGLE-2 takes
    ``q(x) = 1`` for a top-k child (EAGLE #93), which is the one-hot rule.
    """
    return _walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule="iid")


# --- the final and bonus tokens -------------------------------------------------------------------

def tree_final_from_parent_row(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """i.i.d. drafts: after every child of a (non-root) node is rejected, the final token is drawn from the
    parent's target row instead of the node's residual.

    Source: class of bug (an off-by-one between a node's row and its parent's in a flattened tree layout), no
    specific report.
    """
    return _walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule="iid",
                 final_row=lambda parent, slot: parent)


def tree_final_from_root_row(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """Top-k drafts: after every child of a (non-root) node is rejected, the final token is drawn from the
    root's target row.

    Source: class of bug (the root's row reused for every level), no specific report.
    """
    return _walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule="topk",
                 final_row=lambda parent, slot: np.zeros_like(slot))


def tree_bonus_from_parent_row(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """Top-k drafts: the bonus token at a leaf is drawn from the leaf's parent's target row, not the leaf's.

    Source: class of bug (the chain catalogue's ``bonus_from_wrong_row``, in a tree: the leaf's row is the one
    after the leaf's token).
    """
    return _walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule="topk",
                 bonus_row=lambda parent, slot: parent)


# The scheme each bug is checked under (read by check_tree_verifier and the suite when none is given).
tree_residual_not_updated.drafting = "iid"
tree_iid_rule_on_without_replacement.drafting = "without_replacement"
tree_sibling_law_not_renormalised.drafting = "without_replacement"
tree_iid_rule_on_topk_drafts.drafting = "topk"
tree_final_from_parent_row.drafting = "iid"
tree_final_from_root_row.drafting = "topk"
tree_bonus_from_parent_row.drafting = "topk"
