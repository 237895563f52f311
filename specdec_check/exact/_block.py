"""Exact per-row laws of block verification and the expected accepted drafts of a drafted row.

Block verification is Algorithm 2 of Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh,
"Block Verification Accelerates Speculative Decoding" (ICLR 2025); the standard rule is
Algorithm 1 of Leviathan et al. (2023). Rows are float64 [B, gamma(+1), V] as in the
verifier contract: ``target_probs[:, i-1]`` is p_i, ``draft_probs[:, i-1]`` is q_i and
``target_probs[:, gamma]`` is the bonus row p_{gamma+1}.
"""

from __future__ import annotations

import numpy as np

from ._enumerate import _check_path
from .kernels import BlockWeights, acceptance
from .kernels import block_weights as _block_weights

__all__ = [
    "BlockWeights",
    "block_expected_accepted",
    "block_path_accepted_count_law",
    "block_path_step_law",
    "block_weights",
    "one_hot_path_step_law",
    "standard_expected_accepted",
]


def block_weights(draft_token_ids, draft_probs, target_probs) -> BlockWeights:
    """Weights, residual masses, stop probabilities and accepted-count law of block verification
    for each drafted row (Sun et al., ICLR 2025, Algorithm 2; see :class:`BlockWeights`).

    A drafted token with ``q_i(x_i) = 0`` has ratio +inf when ``p_i(x_i) > 0`` and 0 when
    both are 0 (the convention of :func:`acceptance_probabilities`).
    """
    return _block_weights(*_check_path(draft_token_ids, draft_probs, target_probs))


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
