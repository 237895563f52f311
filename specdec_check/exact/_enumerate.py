"""Exact laws by enumeration: joints and one speculative step (Leviathan et al. 2023)."""

from __future__ import annotations

import numpy as np

from .._validation import as_token_array, check_gamma, check_probability_rows
from ..models import last_token_probs, vocab_size_of
from ._outcomes import MAX_OUTCOMES, num_step_outcomes
from .kernels import acceptance, count_law, residual_rows, step_law_given_acceptance

__all__ = [
    "acceptance_probabilities",
    "accepted_count_law",
    "joint",
    "path_accepted_count_law",
    "path_step_law",
    "residual_probs",
    "step_law",
]


def _prompt_array(prompt, vocab_size: int) -> np.ndarray:
    if prompt is None:
        return np.zeros(0, dtype=np.int64)
    return as_token_array(np.asarray(prompt).reshape(-1), vocab_size=vocab_size, name="prompt", ndim=1)


def _with_prompt(prompt: np.ndarray, prefixes: np.ndarray) -> np.ndarray:
    head = np.broadcast_to(prompt, (prefixes.shape[0], prompt.shape[0]))
    return np.concatenate([head, prefixes], axis=1)


def _check_length(length) -> int:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be an int >= 1; got {length!r}.")
    return int(length)


def joint(model, length: int, prompt=None) -> np.ndarray:
    """Exact law of the next ``length`` tokens after ``prompt``: float64 of shape [V]*length.

    Chain rule over the causal interface: ``P(x_1..x_L) = prod_t model(prompt + x_<t)[x_t]``.
    """
    length = _check_length(length)
    vocab = vocab_size_of(model)
    if vocab**length > MAX_OUTCOMES:
        raise ValueError(
            f"joint over V={vocab} and length={length} has {vocab**length:,} outcomes (limit {MAX_OUTCOMES:,}); "
            "use marginals() / pair_marginals() instead."
        )
    prompt = _prompt_array(prompt, vocab)
    prefixes = np.zeros((1, 0), dtype=np.int64)
    weights = np.ones(1)
    for _ in range(length):
        nxt = last_token_probs(model, _with_prompt(prompt, prefixes))  # [S, V]
        weights = (weights[:, None] * nxt).reshape(-1)
        prefixes = np.concatenate(
            [np.repeat(prefixes, vocab, axis=0), np.tile(np.arange(vocab), prefixes.shape[0])[:, None]], axis=1
        )
    return weights.reshape((vocab,) * length)


def step_law(target, draft, gamma: int, prompt=None) -> np.ndarray:
    """Exact law of one speculative step's emitted string from ``prompt``, drafts drawn from ``draft``.

    Returns float64 [num_step_outcomes(V, gamma)] indexed by :func:`encode_emitted`.
    Closed form (Leviathan et al. 2023, Theorem 3.5 unrolled along the path):
    ``P(x_1..x_k, y) = prod_{i<=k} min(p_i(x_i), q_i(x_i)) * (max(0, p_{k+1}(y) - q_{k+1}(y))`` if
    ``k < gamma`` else ``p_{gamma+1}(y))``, every row taken after ``prompt + x_1..x_{i-1}``.
    """
    gamma = check_gamma(gamma)
    vocab = vocab_size_of(target)
    if vocab_size_of(draft) != vocab:
        raise ValueError(f"target and draft must share a vocabulary; got V={vocab} and V={vocab_size_of(draft)}.")
    total = num_step_outcomes(vocab, gamma)
    if total > MAX_OUTCOMES:
        raise ValueError(
            f"the step law over V={vocab}, gamma={gamma} has {total:,} outcomes (limit {MAX_OUTCOMES:,}); "
            "use path_step_law() per row instead."
        )
    prompt = _prompt_array(prompt, vocab)
    out = np.empty(total)
    prefixes = np.zeros((1, 0), dtype=np.int64)
    accept = np.ones(1)  # prod_{i<=k} min(p_i, q_i) for each accepted prefix
    offset = 0
    for k in range(gamma + 1):
        ctx = _with_prompt(prompt, prefixes)
        target_rows = last_token_probs(target, ctx)
        if k == gamma:
            out[offset:] = (accept[:, None] * target_rows).reshape(-1)
            break
        draft_rows = last_token_probs(draft, ctx)
        block = accept[:, None] * np.maximum(target_rows - draft_rows, 0.0)
        out[offset: offset + block.size] = block.reshape(-1)
        offset += block.size
        accept = (accept[:, None] * np.minimum(target_rows, draft_rows)).reshape(-1)
        prefixes = np.concatenate(
            [np.repeat(prefixes, vocab, axis=0), np.tile(np.arange(vocab), prefixes.shape[0])[:, None]], axis=1
        )
    return out


def accepted_count_law(target, draft, gamma: int, prompt=None) -> np.ndarray:
    """Exact law [gamma+1] of the number of accepted drafts in one step from ``prompt``.

    ``P(K >= k) = sum over x_1..x_k of prod_{i<=k} min(p_i(x_i), q_i(x_i))`` (Leviathan et al. 2023).
    """
    gamma = check_gamma(gamma)
    vocab = vocab_size_of(target)
    if vocab**gamma > MAX_OUTCOMES:
        raise ValueError(f"accepted_count_law enumerates V**gamma = {vocab**gamma:,} prefixes (limit {MAX_OUTCOMES:,}).")
    prompt = _prompt_array(prompt, vocab)
    at_least = np.ones(gamma + 1)
    prefixes = np.zeros((1, 0), dtype=np.int64)
    accept = np.ones(1)
    for k in range(1, gamma + 1):
        ctx = _with_prompt(prompt, prefixes)
        accept = (accept[:, None] * np.minimum(last_token_probs(target, ctx), last_token_probs(draft, ctx))).reshape(-1)
        at_least[k] = accept.sum()
        prefixes = np.concatenate(
            [np.repeat(prefixes, vocab, axis=0), np.tile(np.arange(vocab), prefixes.shape[0])[:, None]], axis=1
        )
    law = at_least - np.append(at_least[1:], 0.0)
    return np.clip(law, 0.0, None)


def _check_path(draft_token_ids, draft_probs, target_probs):
    draft_probs = check_probability_rows(draft_probs, name="draft_probs")
    target_probs = check_probability_rows(target_probs, name="target_probs")
    if draft_probs.ndim != 3 or target_probs.ndim != 3:
        raise ValueError(
            f"draft_probs must be [B, gamma, V] and target_probs [B, gamma+1, V]; got {draft_probs.shape} "
            f"and {target_probs.shape}."
        )
    batch, gamma, vocab = draft_probs.shape
    if target_probs.shape != (batch, gamma + 1, vocab):
        raise ValueError(
            f"target_probs must have shape [B, gamma+1, V] = {(batch, gamma + 1, vocab)} to match draft_probs "
            f"{draft_probs.shape} (the last target row is the bonus position); got {target_probs.shape}."
        )
    ids = as_token_array(draft_token_ids, vocab_size=vocab, name="draft_token_ids", allow_padding=False)
    if ids.shape != (batch, gamma):
        raise ValueError(f"draft_token_ids must have shape [B, gamma] = {(batch, gamma)}; got {ids.shape}.")
    return ids, draft_probs, target_probs


def acceptance_probabilities(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Per-position acceptance probabilities ``min(1, p_i(x_i) / q_i(x_i))``, float64 [B, gamma].

    A drafted token with draft probability 0 and target probability > 0 is accepted with
    probability 1 (the ratio is +inf); with both 0 the ratio is undefined and this returns 0.
    """
    return acceptance(*_check_path(draft_token_ids, draft_probs, target_probs))


def residual_probs(draft_probs, target_probs) -> np.ndarray:
    """Residual laws ``norm(max(0, p_i - q_i))`` for the gamma draft positions, float64 [B, gamma, V].

    Rows where the residual is identically zero (``p_i == q_i``) are all zeros: such a
    position never rejects, so its residual is never drawn.
    """
    return residual_rows(draft_probs, target_probs)


def path_step_law(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Exact law of one step's outcome given its drafted path, float64 [B, gamma+1, V].

    ``law[b, k, y]`` is the probability that exactly ``k`` drafts are accepted and the
    final token is ``y``: ``prod_{i<=k} a_i * ((1 - a_{k+1}) r_{k+1}(y)`` if ``k < gamma`` else
    ``p_{gamma+1}(y))`` with ``a_i = min(1, p_i(x_i)/q_i(x_i))`` and ``r_i = norm(max(0, p_i - q_i))``
    (Leviathan et al. 2023, Algorithm 1).
    """
    ids, draft_probs, target_probs = _check_path(draft_token_ids, draft_probs, target_probs)
    return step_law_given_acceptance(acceptance(ids, draft_probs, target_probs), draft_probs, target_probs)


def path_accepted_count_law(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """Exact law [B, gamma+1] of the accepted count given each row's drafted path.

    ``P(K = k) = prod_{i<=k} a_i * (1 - a_{k+1})`` (last factor 1 when k = gamma).
    """
    return count_law(acceptance_probabilities(draft_token_ids, draft_probs, target_probs))
