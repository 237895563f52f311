"""Exact controls: alternative exact verifiers that must pass.

Each has the reference law (Leviathan et al. 2023, Algorithm 1) and differs from
``numpy_verify`` only in how it turns the generator's randomness into decisions.
"""

from __future__ import annotations

import numpy as np

from ._common import as_arrays, assemble, final_rows, first_rejection, gumbel_argmax, inverse_cdf, probs_at, residual

__all__ = [
    "complement_uniform_verify",
    "gumbel_residual_verify",
    "lazy_uniform_verify",
    "one_hot_aware_verify",
    "shared_noise_verify",
]




def gumbel_residual_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: the ratio test u < min(1, p/q), the recovered/bonus token by an exponential race argmax(w / E).

    No normalisation is needed (argmax is scale-invariant); as in vLLM v1 and gpt-fast.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, gamma))
    q_at, p_at = probs_at(q, ids), probs_at(p, ids)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q_at > 0, p_at / np.where(q_at > 0, q_at, 1.0), np.inf)
    stop = first_rejection(~(u < np.minimum(1.0, ratio)))
    final = final_rows(ids, q, p, stop)
    noise = generator.exponential(size=final.shape)
    return assemble(ids, stop, gumbel_argmax(final, noise))


def complement_uniform_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: division-free test on the complement, accept iff (1 - u) * q(x) <= p(x), and the final
    token by inverse CDF scanned from the end of the vocabulary with an independent uniform."""
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    u = generator.random((batch, gamma + 1))
    stop = first_rejection((1.0 - u[:, :gamma]) * probs_at(q, ids) > probs_at(p, ids))
    final = final_rows(ids, q, p, stop)
    vocab = final.shape[1]
    token = vocab - 1 - inverse_cdf(final[:, ::-1], u[:, gamma])
    return assemble(ids, stop, token)


def shared_noise_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: one Exp(1) noise vector per row, shared by every position, for the single recovered or bonus token.

    Only one token per row is ever drawn from it, so sharing is harmless (vLLM v1's
    ``sample_recovered_tokens``); the residual is computed at every position first.
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    rows = np.arange(batch)
    u = generator.random((batch, gamma))
    noise = generator.exponential(size=(batch, p.shape[-1]))
    stop = first_rejection(u * probs_at(q, ids) >= probs_at(p, ids))
    candidates = np.empty((batch, gamma + 1), dtype=np.int64)
    for i in range(gamma):
        candidates[:, i] = gumbel_argmax(residual(p[:, i], q[:, i]), noise)
    candidates[:, gamma] = gumbel_argmax(p[:, gamma], noise)
    return assemble(ids, stop, candidates[rows, stop])


def lazy_uniform_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: draws each position's uniform only for the rows still accepting, one position at a time."""
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    q_at, p_at = probs_at(q, ids), probs_at(p, ids)
    stop = np.full(batch, gamma, dtype=np.int64)
    alive = np.arange(batch)
    for i in range(gamma):
        if alive.size == 0:
            break
        u = generator.random(alive.size)
        rej = u * q_at[alive, i] >= p_at[alive, i]
        stop[alive[rej]] = i
        alive = alive[~rej]
    final = final_rows(ids, q, p, stop)
    return assemble(ids, stop, inverse_cdf(final, generator.random(batch)))


def one_hot_aware_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: the deterministic-draft rule where the draft row is one-hot, the standard rule elsewhere.

    Where q_i is one-hot at x_i it accepts with probability p_i(x_i) (a separate uniform) and
    recovers from p_i with x_i zeroed, which equals norm(max(0, p_i - q_i)) there (EAGLE-2,
    SGLang target-only, vLLM's no-draft-probs mode). Rows that are not one-hot use the
    Leviathan test. (The p(x) rule is lossless for any q, but accepts less when q is not
    one-hot, so a control must not use it there.)
    """
    ids, q, p = as_arrays(draft_token_ids, draft_probs, target_probs)
    batch, gamma = ids.shape
    q_at, p_at = probs_at(q, ids), probs_at(p, ids)
    one_hot = q_at >= 1.0
    u_std = generator.random((batch, gamma))
    u_hot = generator.random((batch, gamma))
    rejected = np.where(one_hot, u_hot >= p_at, u_std * q_at >= p_at)
    stop = first_rejection(rejected)
    rows = np.arange(batch)
    final = final_rows(ids, q, p, stop)
    hot = (stop < gamma) & one_hot[rows, np.minimum(stop, max(gamma - 1, 0))] if gamma else np.zeros(batch, bool)
    if hot.any():
        r = rows[hot]
        final[r] = p[r, stop[r]]
        final[r, ids[r, stop[r]]] = 0.0
    noise = generator.exponential(size=final.shape)
    return assemble(ids, stop, gumbel_argmax(final, noise))
