"""Expected tokens per step and wall-time speedup (Leviathan et al. 2023, Section 3)."""

from __future__ import annotations

import numpy as np

from .._validation import check_gamma
from ._enumerate import accepted_count_law

__all__ = ["exact_tokens_per_step", "expected_speedup", "expected_target_calls", "expected_tokens_per_step", "improves_walltime"]


def _check_rate(value, name):
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1]; got {value}.")
    return value


def expected_tokens_per_step(alpha, gamma) -> float:
    """Expected tokens emitted per step, ``(1 - alpha^(gamma+1)) / (1 - alpha)`` (Equation 1).

    Assumes i.i.d. acceptance with rate ``alpha``; equals ``gamma + 1`` at ``alpha = 1``.
    """
    alpha = _check_rate(alpha, "alpha")
    gamma = check_gamma(gamma)
    if alpha == 1.0:
        return float(gamma + 1)
    return float((1.0 - alpha ** (gamma + 1)) / (1.0 - alpha))


def expected_speedup(alpha, gamma, cost_ratio) -> float:
    """Expected wall-time improvement factor ``(1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1))``.

    Leviathan et al. 2023, Theorem 3.8, with ``c = cost_ratio`` the draft/target cost ratio.
    """
    cost_ratio = float(cost_ratio)
    if cost_ratio < 0 or not np.isfinite(cost_ratio):
        raise ValueError(f"cost_ratio must be a finite number >= 0; got {cost_ratio}.")
    return expected_tokens_per_step(alpha, gamma) / (check_gamma(gamma) * cost_ratio + 1.0)


def improves_walltime(alpha, cost_ratio) -> bool:
    """Corollary 3.9: some gamma gives a speedup iff ``alpha > c``."""
    return _check_rate(alpha, "alpha") > float(cost_ratio)


def exact_tokens_per_step(target, draft, gamma, prompt=None) -> float:
    """Exact expected tokens per step from ``prompt``, without the i.i.d. assumption: ``1 + E[K]``."""
    law = accepted_count_law(target, draft, gamma, prompt)
    return float(1.0 + law @ np.arange(law.size))


def expected_target_calls(target, draft, gamma, max_new_tokens, prompt=None, *, with_variance=False):
    """Exact expected number of target calls (steps) to emit ``max_new_tokens`` tokens from ``prompt``.

    Dynamic programming over (tokens emitted so far, last ``order`` tokens):
    ``S(n, c) = 1 + sum_{m, c'} P(step emits m tokens ending in context c' | c) S(n + m, c')`` with
    ``S(n, c) = 0`` for ``n >= max_new_tokens``; step laws from :func:`step_law`. With
    ``with_variance`` returns ``(mean, variance)`` (the second moment by the same recursion).
    """
    from ._enumerate import _prompt_array, step_law
    from ..models import last_context_indices
    from ._outcomes import decode_emitted

    gamma = check_gamma(gamma)
    vocab = target.vocab_size
    order = max(target.order, draft.order)
    prompt = _prompt_array(prompt, vocab)
    cache = {}

    def transitions(context):
        """[((length, next_context), prob)] aggregated over the emitted strings of one step."""
        if context not in cache:
            law = step_law(target, draft, gamma, np.array([t for t in context if t < vocab], dtype=np.int64))
            codes = np.flatnonzero(law > 0)
            strings = decode_emitted(codes, vocab, gamma)
            lengths = (strings >= 0).sum(axis=1)
            head = np.where(np.array(context, dtype=np.int64) < vocab, np.array(context, dtype=np.int64), -1)
            full = np.concatenate([np.broadcast_to(head, (codes.size, head.size)), strings], axis=1)
            nxt = last_context_indices(full, order=order, vocab_size=vocab)
            key = lengths.astype(np.int64)
            for i in range(order):
                key = key * (vocab + 1) + nxt[:, i]
            uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            mass = np.bincount(inverse.reshape(-1), weights=law[codes])
            cache[context] = [((int(lengths[f]), tuple(int(t) for t in nxt[f])), float(m)) for f, m in zip(first, mass)]
        return cache[context]

    memo = {}

    def moments(n, context):
        """(E[S], E[S^2]) of the remaining number of steps: S = 1 + S' after one step."""
        if n >= max_new_tokens:
            return 0.0, 0.0
        key = (n, context)
        if key not in memo:
            first = second = 0.0
            for (length, nxt), prob in transitions(context):
                m1, m2 = moments(n + length, nxt)
                first += prob * (1.0 + m1)
                second += prob * (1.0 + 2.0 * m1 + m2)
            memo[key] = (first, second)
        return memo[key]

    start = tuple(int(t) for t in last_context_indices(prompt[None, :], order=order, vocab_size=vocab)[0])
    mean, second = moments(0, start)
    return (mean, max(second - mean * mean, 0.0)) if with_variance else mean
