"""The reference tree verifiers in numpy: multi-round rejection sampling for each drafting scheme.

The tree-verifier contract::

    verify_tree(*, parents, draft_token_ids, draft_probs, target_probs, generator) -> int [B, depth + 1]

``parents`` int [B, N] (-1: a child of the root; ``parents[:, i] < i``), ``draft_token_ids`` int
[B, N], ``draft_probs`` / ``target_probs`` float [B, N+1, V] (row 0 the root's laws, row ``i + 1``
the laws after node ``i``'s path: node ``j``'s children were drafted from draft row ``j + 1``).
The output is the accepted root path's tokens, then the final (recovered or bonus) token, then
-1 padding; ``depth`` is the deepest node's depth in the batch.
"""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_verify_tree_iid", "numpy_verify_tree_topk", "numpy_verify_tree_without_replacement",
           "verify_tree_output_width"]


def verify_tree_output_width(parents: np.ndarray) -> int:
    """``depth + 1``: the output width for a batch of trees (the deepest node's depth, plus one)."""
    batch, nodes = parents.shape
    depth = np.zeros((batch, nodes + 1), dtype=np.int64)
    rows = np.arange(batch)
    for i in range(nodes):
        depth[:, i + 1] = depth[rows, parents[:, i] + 1] + 1
    return int(depth.max()) + 1


def _ratio(residual_at, proposal_at):
    """``r(x) / q(x)``; ``q(x) = 0``: +inf if ``r(x) > 0`` else 0 (compared with a coin in [0, 1))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(proposal_at > 0, residual_at / np.where(proposal_at > 0, proposal_at, 1.0),
                        np.where(residual_at > 0, np.inf, 0.0))


def _normalise(rows, out=None):
    """Rows divided by their sums (rows of sum 0 stay 0); in place when ``out`` is ``rows``."""
    total = rows.sum(axis=1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows) if out is None else out, where=total > 0)


def _verify_tree(rule, parents, draft_token_ids, draft_probs, target_probs, generator):
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
    parents = np.asarray(parents, dtype=np.int64)
    ids = np.asarray(draft_token_ids, dtype=np.int64)
    draft = np.asarray(draft_probs, dtype=np.float64)
    target = np.asarray(target_probs, dtype=np.float64)
    batch, nodes = ids.shape
    vocab = target.shape[-1]
    if parents.shape != ids.shape or target.shape != (batch, nodes + 1, vocab) or draft.shape != target.shape:
        raise ValueError(f"expected parents and draft_token_ids [B, N], draft_probs and target_probs [B, N+1, V]; got "
                         f"{parents.shape}, {ids.shape}, {draft.shape}, {target.shape}.")
    coins = generator.random((batch, nodes + 1))  # one per node, the last for the final token
    width = verify_tree_output_width(parents)
    out = np.full((batch, width), -1, dtype=np.int64)
    current = np.zeros(batch, dtype=np.int64)  # the slot the walk is at (0: the root)
    emitted = np.zeros(batch, dtype=np.int64)
    residual = target[:, 0].copy()
    left = draft[:, 0].copy() if rule == "without_replacement" else None  # draft row, tried siblings removed
    for i in range(nodes):
        rows = np.flatnonzero(parents[:, i] + 1 == current)  # rows where node i is the next child to try
        if not rows.size:
            continue
        x = ids[rows, i]
        r_x = residual[rows, x]
        if rule == "topk":
            q_x = np.ones(rows.size)
        elif rule == "iid":
            q_x = draft[rows, current[rows], x]
        else:
            total = left[rows].sum(axis=1)
            q_x = np.divide(left[rows, x], total, out=np.zeros(rows.size), where=total > 0)
        if not (np.isfinite(r_x).all() and np.isfinite(q_x).all()):
            raise ValueError("target_probs or draft_probs is NaN or infinite at a drafted token.")
        accepted = coins[rows, i] < _ratio(r_x, q_x)
        hit, miss, x_miss = rows[accepted], rows[~accepted], x[~accepted]
        out[hit, emitted[hit]] = x[accepted]
        emitted[hit] += 1
        current[hit] = i + 1
        residual[hit] = target[hit, i + 1]
        if left is not None:
            left[hit] = draft[hit, i + 1]
        if not miss.size:
            continue
        r = residual[miss]  # the residual of the rejected rows: r <- norm(max(r - q_i, 0)), or x zeroed (top-k)
        if rule == "topk":
            r[np.arange(miss.size), x_miss] = 0.0
        else:
            q = draft[miss, current[miss]] if rule == "iid" else _normalise(left[miss])
            np.subtract(r, q, out=r)
            np.maximum(r, 0.0, out=r)
        residual[miss] = _normalise(r, out=r)
        if left is not None:
            left[miss, x_miss] = 0.0
    cdf = np.cumsum(residual, axis=1)
    total = cdf[:, -1]
    if not np.isfinite(total).all():
        raise ValueError("target_probs or draft_probs is NaN or infinite in a row the step samples from.")
    token = np.count_nonzero(cdf <= (coins[:, nodes] * total)[:, None], axis=1)
    over = token >= vocab  # u * total rounded up to the total, or a law with no mass
    if over.any():
        positive = residual[over] > 0
        if not positive.any(axis=1).all():
            raise ValueError("the law of a final token has no mass (inputs that are not probability rows?).")
        token[over] = vocab - 1 - positive[:, ::-1].argmax(axis=1)
    out[np.arange(batch), emitted] = token
    return out


def numpy_verify_tree_iid(*, parents, draft_token_ids, draft_probs, target_probs, generator) -> np.ndarray:
    """Multi-round rejection sampling for children drafted independently (SpecInfer, Miao et al. 2023,
    Algorithm 2): child ``x`` of a node is accepted iff ``u < r(x) / q(x)`` with ``q`` the node's draft
    row and ``r`` the residual (the target row at first); on rejection ``r <- norm(max(r - q, 0))``;
    the final token is drawn from ``r`` after the last child, or from the leaf's target row."""
    return _verify_tree("iid", parents, draft_token_ids, draft_probs, target_probs, generator)


def numpy_verify_tree_without_replacement(*, parents, draft_token_ids, draft_probs, target_probs,
                                          generator) -> np.ndarray:
    """Recursive rejection sampling for siblings drafted without replacement (Jeon et al. 2024; EAGLE-1):
    as :func:`numpy_verify_tree_iid`, with ``q`` the draft row with the earlier siblings removed and
    renormalised."""
    return _verify_tree("without_replacement", parents, draft_token_ids, draft_probs, target_probs, generator)


def numpy_verify_tree_topk(*, parents, draft_token_ids, draft_probs, target_probs, generator) -> np.ndarray:
    """The one-hot rule for deterministic top-k drafts (EAGLE-2/3, SGLang target-only): child ``x`` is
    accepted iff ``u < r(x)``; on rejection ``x`` is zeroed in ``r`` and ``r`` renormalised. The draft
    law is never read, so this rule is exact for any drafting scheme (it is sequential inverse-CDF
    sampling of the target over the children)."""
    return _verify_tree("topk", parents, draft_token_ids, draft_probs, target_probs, generator)


numpy_verify_tree_iid.drafting = "iid"
numpy_verify_tree_without_replacement.drafting = "without_replacement"
numpy_verify_tree_topk.drafting = "topk"
