"""Unvalidated kernels of the exact per-row laws, shared by the oracles and the checker.

The validated public functions (:func:`specdec_check.exact.acceptance_probabilities`,
:func:`~specdec_check.exact.path_step_law`, :func:`~specdec_check.exact.path_accepted_count_law`)
check their inputs and call these; the checker builds its rows itself and calls them directly.
Leviathan et al. 2023, Algorithm 1: ``a_i = min(1, p_i(x_i) / q_i(x_i))``,
``P(K = k) = prod_{i<k} a_i (1 - a_k)``, and the final token's law ``norm(max(0, p_k - q_k))``
after a rejection at ``k``, ``p_gamma`` after full acceptance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BlockWeights", "acceptance", "block_weights", "count_law", "residual_rows", "step_law_given_acceptance"]


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


@dataclass(frozen=True)
class BlockWeights:
    """The quantities of Algorithm 2 (Sun et al., ICLR 2025) along each drafted row.

    ``weights`` [B, gamma+1]: ``w_0 = 1``, ``w_i = min(w_{i-1} p_i(x_i) / q_i(x_i), 1)``.
    ``residual_mass`` [B, gamma]: ``r_i = sum_x max(w_i p_{i+1}(x) - q_{i+1}(x), 0)`` for i = 0..gamma-1.
    ``stop_probs`` [B, gamma+1]: ``h_0 = 1`` (tau = 0 when no coin passes), ``h_i = r_i / (r_i + 1 - w_i)``
    for 0 < i < gamma (0 when the denominator is 0), ``h_gamma = w_gamma``.
    ``accepted_count_law`` [B, gamma+1]: ``P(tau = i) = h_i prod_{j>i} (1 - h_j)``.
    """

    weights: np.ndarray
    residual_mass: np.ndarray
    stop_probs: np.ndarray
    accepted_count_law: np.ndarray


#: ``unit_residual_mass`` is used when at least this share of a call's (row, position)s has weight 1: the others'
#: rows are gathered before their pass, so below about a third it costs more than one pass over every row (at
#: V = 32,000 with 80% of weights 1: 7.5 -> 3.2 ms a block; at V = 1,000 with 28%: 5.0 -> 5.2 ms).
UNIT_MASS_MIN_SHARE = 0.5


def block_weights(ids, draft_probs, target_probs, unit_residual_mass=None) -> BlockWeights:
    """Block verification's weights along each drafted row, unvalidated (:func:`specdec_check.exact.block_weights`;
    Sun et al., ICLR 2025, Algorithm 2).

    ``unit_residual_mass`` [B, gamma], optional: ``sum_x max(p_i(x) - q_i(x), 0)`` of each row's position ``i``, the
    residual mass ``r_i`` at weight ``w_i = 1`` (a scenario's law tables hold it per distinct law). Where a weight is
    exactly 1 it is taken from there instead of a pass over the vocabulary: ``1 * p`` is ``p``, and the table's sum
    over a row of the same values is the same float (the same pairwise summation along a contiguous row), so the
    result is the same to the bit. Weight 1 is the rule at position 0 and wherever ``p_i(x_i) >= q_i(x_i)`` held
    along the path (80% of the positions at V = 32,000 in the default battery: issue 31); the masses are used when
    at least :data:`UNIT_MASS_MIN_SHARE` of the weights are 1. Rows that are not C-contiguous (a custom scenario's
    Fortran-ordered draw) are summed along their own memory order by the pass over the vocabulary, which the
    tables' contiguous sums would not reproduce: the masses are not used there."""
    batch, gamma = ids.shape
    p_at = np.take_along_axis(target_probs[:, :gamma], ids[..., None], axis=2)[..., 0]
    q_at = np.take_along_axis(draft_probs, ids[..., None], axis=2)[..., 0]
    weights = np.ones((batch, gamma + 1))
    for i in range(1, gamma + 1):
        prev, p, q = weights[:, i - 1], p_at[:, i - 1], q_at[:, i - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(q > 0, prev * p / np.where(q > 0, q, 1.0), np.where((p > 0) & (prev > 0), 1.0, 0.0))
        weights[:, i] = np.minimum(scaled, 1.0)
    # max(0, w p - q) summed over the vocabulary, formed in one temporary (the same numbers as three fresh arrays;
    # at V = 32,000 each fresh array of a block is 33 MB of new pages)
    row = position = None
    if unit_residual_mass is not None and target_probs.flags.c_contiguous and draft_probs.flags.c_contiguous:
        row, position = np.nonzero(weights[:, :gamma] != 1.0)
        if row.size > (1.0 - UNIT_MASS_MIN_SHARE) * batch * gamma:
            row = position = None  # too few weights of 1: one pass over every row costs less
    if row is None:
        residual = np.multiply(weights[:, :gamma, None], target_probs[:, :gamma])
        np.subtract(residual, draft_probs, out=residual)
        residual_mass = np.maximum(residual, 0.0, out=residual).sum(axis=2)
    else:  # only the (row, position)s whose weight is below 1 are summed here; the others are the given masses
        residual_mass = np.array(unit_residual_mass, dtype=np.float64, copy=True).reshape(batch, gamma)
        if row.size:
            residual = np.multiply(weights[row, position][:, None], target_probs[row, position])
            np.subtract(residual, draft_probs[row, position], out=residual)
            residual_mass[row, position] = np.maximum(residual, 0.0, out=residual).sum(axis=1)
    residual = None
    stop = np.ones((batch, gamma + 1))
    if gamma:
        denominator = residual_mass[:, 1:] + 1.0 - weights[:, 1:gamma]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = residual_mass[:, 1:] / np.where(denominator > 0, denominator, 1.0)
        # h_i <= 1 in exact arithmetic (w_i <= 1); clipping undoes the rounding of r_i + 1 - w_i
        stop[:, 1:gamma] = np.where(denominator > 0, np.minimum(ratio, 1.0), 0.0)
        stop[:, gamma] = weights[:, gamma]
    # P(tau = i) = h_i prod_{j > i} (1 - h_j), with h_0 = 1
    survive = np.ones((batch, gamma + 2))
    survive[:, : gamma + 1] = np.cumprod((1.0 - stop)[:, ::-1], axis=1)[:, ::-1]  # prod_{j >= i} (1 - h_j)
    count_law = stop * survive[:, 1:]
    return BlockWeights(weights, residual_mass, stop, count_law)
