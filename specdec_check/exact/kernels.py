"""Unvalidated kernels of the exact per-row laws, shared by the oracles and the checker.

The validated public functions (:func:`specdec_check.exact.acceptance_probabilities`,
:func:`~specdec_check.exact.path_step_law`, :func:`~specdec_check.exact.path_accepted_count_law`)
check their inputs and call these; the checker builds its rows itself and calls them directly.
Leviathan et al. 2023, Algorithm 1: ``a_i = min(1, p_i(x_i) / q_i(x_i))``,
``P(K = k) = prod_{i<k} a_i (1 - a_k)``, and the final token's law ``norm(max(0, p_k - q_k))``
after a rejection at ``k``, ``p_gamma`` after full acceptance.
"""

from __future__ import annotations

import numpy as np

__all__ = ["acceptance", "count_law", "residual_rows", "step_law_given_acceptance"]


def acceptance(ids, draft_probs, target_probs):
    """``min(1, p_i(x_i) / q_i(x_i))`` [B, gamma] (``p > 0 = q``: 1; ``p = q = 0``: 0), unvalidated."""
    gamma = ids.shape[1]
    p = np.take_along_axis(target_probs[:, :gamma], ids[..., None], axis=2)[..., 0]
    q = np.take_along_axis(draft_probs, ids[..., None], axis=2)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.where(p > 0, 1.0, 0.0))
    return np.minimum(ratio, 1.0)


def residual_rows(draft_probs, target_probs) -> np.ndarray:
    """``norm(max(0, p_i - q_i))`` [B, gamma, V] for the draft positions; all-zero rows where ``p_i == q_i``."""
    gamma = draft_probs.shape[1]
    diff = np.maximum(np.asarray(target_probs)[:, :gamma] - np.asarray(draft_probs), 0.0)
    mass = diff.sum(axis=-1, keepdims=True)
    return np.divide(diff, mass, out=np.zeros_like(diff), where=mass > 0)


def step_law_given_acceptance(accept, draft_probs, target_probs):
    """``law[b, k, y] = P(K = k, Y = y)`` [B, gamma+1, V] from the acceptances ``accept`` [B, gamma]."""
    batch, gamma = accept.shape
    reach = np.concatenate([np.ones((batch, 1)), np.cumprod(accept, axis=1)], axis=1)  # P(K >= k)
    law = np.empty_like(target_probs)
    law[:, :gamma] = (reach[:, :gamma] * (1.0 - accept))[..., None] * residual_rows(draft_probs, target_probs)
    law[:, gamma] = reach[:, gamma, None] * target_probs[:, gamma]
    return law


def count_law(accept):
    """``P(K = k) = prod_{i<k} a_i (1 - a_k)`` [B, gamma+1] from the acceptances ``accept`` [B, gamma]."""
    batch, gamma = accept.shape
    law = np.empty((batch, gamma + 1))
    reach = np.ones(batch)  # prod_{i<k} a_i, one column at a time (cheaper than cumprod along a short axis)
    for k in range(gamma):
        np.multiply(reach, 1.0 - accept[:, k], out=law[:, k])
        reach = reach * accept[:, k]
    law[:, gamma] = reach
    return law
