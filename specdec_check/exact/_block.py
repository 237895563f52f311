"""Exact per-row laws of block verification and the expected accepted drafts of a drafted row.

Block verification is Algorithm 2 of Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh,
"Block Verification Accelerates Speculative Decoding" (ICLR 2025); the standard rule is
Algorithm 1 of Leviathan et al. (2023). Rows are float64 [B, gamma(+1), V] as in the
verifier contract: ``target_probs[:, i-1]`` is p_i, ``draft_probs[:, i-1]`` is q_i and
``target_probs[:, gamma]`` is the bonus row p_{gamma+1}.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._enumerate import _check_path
from .kernels import acceptance

__all__ = [
    "BlockWeights",
    "block_expected_accepted",
    "block_path_accepted_count_law",
    "block_path_step_law",
    "block_weights",
    "one_hot_path_step_law",
    "standard_expected_accepted",
]


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


def block_weights(draft_token_ids, draft_probs, target_probs) -> BlockWeights:
    """Weights, residual masses, stop probabilities and accepted-count law of block verification
    for each drafted row (Sun et al., ICLR 2025, Algorithm 2; see :class:`BlockWeights`).

    A drafted token with ``q_i(x_i) = 0`` has ratio +inf when ``p_i(x_i) > 0`` and 0 when
    both are 0 (the convention of :func:`acceptance_probabilities`).
    """
    return _block_weights(*_check_path(draft_token_ids, draft_probs, target_probs))


def _block_weights(ids, draft_probs, target_probs) -> BlockWeights:
    """:func:`block_weights` without input validation."""
    batch, gamma = ids.shape
    p_at = np.take_along_axis(target_probs[:, :gamma], ids[..., None], axis=2)[..., 0]
    q_at = np.take_along_axis(draft_probs, ids[..., None], axis=2)[..., 0]
    weights = np.ones((batch, gamma + 1))
    for i in range(1, gamma + 1):
        prev, p, q = weights[:, i - 1], p_at[:, i - 1], q_at[:, i - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(q > 0, prev * p / np.where(q > 0, q, 1.0), np.where((p > 0) & (prev > 0), 1.0, 0.0))
        weights[:, i] = np.minimum(scaled, 1.0)
    residual_mass = np.maximum(weights[:, :gamma, None] * target_probs[:, :gamma] - draft_probs, 0.0).sum(axis=2)
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


def block_path_step_law(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Exact law of one block-verification step given its drafted path, float64 [B, gamma+1, V].

    ``law[b, k, y] = P(tau = k) * R_k(y)`` with ``P(tau = k) = h_k prod_{j>k} (1 - h_j)`` and
    ``R_k = norm(max(w_k p_{k+1} - q_{k+1}, 0))`` for k < gamma, ``R_gamma = p_{gamma+1}``
    (Sun et al., ICLR 2025, Algorithm 2; weights and stop probabilities as in :class:`BlockWeights`).
    A residual without mass gets no probability (its P(tau = k) is 0 for drafts drawn from the draft rows).
    """
    ids, draft_probs, target_probs = _check_path(draft_token_ids, draft_probs, target_probs)
    return _block_path_step_law(ids, draft_probs, target_probs)


def _block_path_step_law(ids, draft_probs, target_probs):
    """:func:`block_path_step_law` without input validation."""
    gamma = ids.shape[1]
    info = _block_weights(ids, draft_probs, target_probs)
    law = np.empty_like(target_probs)
    residual = np.maximum(info.weights[:, :gamma, None] * target_probs[:, :gamma] - draft_probs, 0.0)
    mass = info.residual_mass[..., None]
    law[:, :gamma] = np.divide(residual, mass, out=np.zeros_like(residual), where=mass > 0)
    law[:, gamma] = target_probs[:, gamma]
    return law * info.accepted_count_law[..., None]


def block_path_accepted_count_law(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Exact law [B, gamma+1] of the number of drafts block verification accepts on each drafted row:
    ``P(tau = k) = h_k prod_{j>k} (1 - h_j)`` (Sun et al., ICLR 2025, Algorithm 2)."""
    return block_weights(draft_token_ids, draft_probs, target_probs).accepted_count_law


def standard_expected_accepted(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Expected accepted drafts of the standard rule on each drafted row, float64 [B]:
    ``sum_{i=1..gamma} prod_{j<=i} min(1, p_j(x_j) / q_j(x_j))`` (Leviathan et al. 2023, Algorithm 1).

    Averaged over rows whose drafts were drawn from the draft rows, it is an unbiased estimate
    of the standard rule's expected accepted drafts per step (10/9 in the two-token example of
    Sun et al., ICLR 2025, Section 2).
    """
    accept = acceptance(*_check_path(draft_token_ids, draft_probs, target_probs))
    return np.cumprod(accept, axis=1).sum(axis=1)


def block_expected_accepted(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Expected accepted drafts of block verification on each drafted row, float64 [B]:
    ``E[tau | x_1..x_gamma] = sum_k k P(tau = k)`` (Sun et al., ICLR 2025, Algorithm 2).

    What this per-row figure is, exactly: the conditional expectation of block verification's
    accepted count given the drafted path. Its expectation over drafts drawn from the draft
    model is the optimum of expected accepted drafts among valid verifiers (the paper's
    Theorem 2; 11/9 in its two-token example), so the average over rows drawn from the draft
    is an unbiased estimate of that optimum. It is *not* a per-row upper bound: a valid
    verifier can accept more than this on some drafted rows (the standard rule does, on some
    rows of the paper's example) as long as it accepts less on others.
    """
    info = block_weights(draft_token_ids, draft_probs, target_probs)
    return info.accepted_count_law @ np.arange(info.accepted_count_law.shape[1], dtype=np.float64)


def one_hot_path_step_law(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Exact step law [B, gamma+1, V] of the one-hot rule given the drafted path, which is also
    the law of sampled-match verification.

    One-hot rule: accept ``x_i`` with probability ``p_i(x_i)``; at the first rejection draw from
    ``p_i`` with ``x_i`` removed and renormalised; the bonus from ``p_{gamma+1}``. Sampled match
    (llama.cpp ``common_sampler_sample_and_accept_n``): draw ``y_i ~ p_i`` at each position and
    accept while ``y_i == x_i``, emitting the first mismatching draw. Both give
    ``law[b, k, y] = prod_{i<=k} p_i(x_i) * (p_{k+1}(y) [y != x_{k+1}]`` if k < gamma else
    ``p_{gamma+1}(y))``: every emitted token is a target draw, so both are lossless for any draft.
    ``draft_probs`` is not used (it is accepted for the step-law signature).
    """
    ids, draft_probs, target_probs = _check_path(draft_token_ids, draft_probs, target_probs)
    return _one_hot_path_step_law(ids, target_probs)


def _one_hot_path_step_law(ids, target_probs):
    batch, gamma = ids.shape
    p_at = np.take_along_axis(target_probs[:, :gamma], ids[..., None], axis=2)[..., 0]
    reach = np.concatenate([np.ones((batch, 1)), np.cumprod(p_at, axis=1)], axis=1)
    law = target_probs * reach[..., None]
    if gamma:
        np.put_along_axis(law[:, :gamma], ids[..., None], 0.0, axis=2)
    return law
