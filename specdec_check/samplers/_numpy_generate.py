"""The reference speculative decode loop in numpy."""

from __future__ import annotations

import numpy as np

from .._validation import as_token_array, check_gamma
from ..models import last_token_probs, vocab_size_of
from ._numpy_verify import numpy_verify

__all__ = ["categorical", "check_generate_args", "numpy_generate"]


def categorical(probs: np.ndarray, generator: np.random.Generator, *, cdf: np.ndarray | None = None) -> np.ndarray:
    """Draw one token per row of ``probs`` [N, V] by inverse CDF (never a zero-mass token).

    ``cdf``, when given, must be ``np.cumsum(probs, axis=1)`` (for example gathered from a
    model's cumulative table); the draw is then the same without the cumulative sum.
    """
    if cdf is None:
        cdf = np.cumsum(probs, axis=1)
    token = (cdf <= (generator.random(cdf.shape[0]) * cdf[:, -1])[:, None]).sum(axis=1)
    over = token >= cdf.shape[1]
    if over.any():
        token[over] = _last_positive(probs[over])
    return token


def _last_positive(rows: np.ndarray) -> np.ndarray:
    """Index of the last positive entry of each row: where inverse CDF lands when ``u * total``
    rounds up to the total."""
    return rows.shape[1] - 1 - (rows[:, ::-1] > 0).argmax(axis=1)


def exclusive_cumsum(rows: np.ndarray) -> np.ndarray:
    """``below[..., y] = sum_{t<y} rows[..., t]`` with the row total in the last of ``V + 1`` columns,
    so that ``F(y-1)`` and ``F(V-1)`` of a sample are single gathers."""
    below = np.empty(rows.shape[:-1] + (rows.shape[-1] + 1,))
    below[..., 0] = 0.0
    np.cumsum(rows, axis=-1, out=below[..., 1:])
    return below


def search_table(below: np.ndarray) -> np.ndarray:
    """The search form of exclusive cumulative rows ``below`` [K, V+1] (``below[:, 0] = 0``, the
    total last) for :func:`categorical_from_table`: padded with +inf to a power-of-two width."""
    rows, width = below.shape
    padded = np.full((rows, 1 << int(np.ceil(np.log2(width)))), np.inf)
    padded[:, :width] = below
    return padded


def categorical_from_table(table: np.ndarray, row_index: np.ndarray, generator: np.random.Generator, *,
                           probs_rows: np.ndarray) -> np.ndarray:
    """:func:`categorical` of the rows ``probs_rows[row_index]`` [K, V] without gathering them.

    ``table`` is :func:`search_table` of their exclusive cumulative rows. The same uniforms give
    the same tokens as :func:`categorical` on the gathered rows: the token is the number of
    inclusive cumulative sums ``<= u * total``, found by a branchless binary search (log2(V + 1)
    gathers per row; Knuth, TAOCP vol. 3, section 6.2.1) instead of a pass over all V entries.
    """
    vocab = probs_rows.shape[1]
    width = table.shape[1]
    flat = table.reshape(-1)
    offset = row_index * width
    x = generator.random(row_index.shape[0]) * flat[offset + vocab]
    token = np.zeros(row_index.shape[0], dtype=np.int64)
    step = width // 2
    while step:  # invariant: below[token] <= x (below[0] = 0), and the answer is below token + 2 * step
        token += step * (flat[offset + token + step] <= x)
        step //= 2
    over = token >= vocab
    if over.any():
        token[over] = _last_positive(probs_rows[row_index[over]])
    return token


def check_generate_args(target, draft, prompts, max_new_tokens, gamma, generator):
    """Validate the decode-loop contract's arguments; return ``(gamma, vocab_size, prompts int64)``."""
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
    gamma = check_gamma(gamma)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0; got {max_new_tokens!r}.")
    vocab = vocab_size_of(target)
    if vocab_size_of(draft) != vocab:
        raise ValueError(f"target and draft must share a vocabulary; got V={vocab} and V={vocab_size_of(draft)}.")
    return gamma, vocab, as_token_array(prompts, vocab_size=vocab, name="prompts")


def numpy_generate(*, target, draft, prompts, max_new_tokens, gamma, generator, verify=numpy_verify) -> np.ndarray:
    """Speculative decoding of ``max_new_tokens`` tokens per prompt (Leviathan et al. 2023).

    Each step drafts ``gamma`` tokens autoregressively from ``draft``, scores all
    ``gamma + 1`` positions with one call of ``target``, runs ``verify`` and advances
    each chain by its own number of emitted tokens. ``prompts`` is int [B, P] with
    ``-1`` padding allowed; returns int64 [B, max_new_tokens].
    """
    gamma, vocab, prompts = check_generate_args(target, draft, prompts, max_new_tokens, gamma, generator)
    batch, prompt_len = prompts.shape
    # Column 0 is padding so that position "after the prompt" always exists, even for empty prompts.
    width = 1 + prompt_len + max_new_tokens + gamma + 1
    seq = np.full((batch, width), -1, dtype=np.int64)
    seq[:, 1: 1 + prompt_len] = prompts
    produced = np.zeros(batch, dtype=np.int64)
    rows = np.arange(batch)
    while True:
        active = rows[produced < max_new_tokens]
        if active.size == 0:
            break
        base = prompt_len + produced[active]  # index of each chain's last column (prompt + generated)
        horizon = int(base.max()) + gamma + 1
        window = seq[active, :horizon].copy()
        drafts = np.empty((active.size, gamma), dtype=np.int64)
        draft_rows = np.empty((active.size, gamma, vocab))
        for j in range(gamma):
            draft_rows[:, j] = last_token_probs(draft, window)
            drafts[:, j] = categorical(draft_rows[:, j], generator)
            window[np.arange(active.size), base + 1 + j] = drafts[:, j]
        scored = np.asarray(target(window), dtype=np.float64)  # one target call for all gamma+1 positions
        positions = base[:, None] + np.arange(gamma + 1)
        target_rows = np.take_along_axis(scored, positions[..., None], axis=1)
        out = np.asarray(verify(draft_token_ids=drafts, draft_probs=draft_rows, target_probs=target_rows,
                                generator=generator))
        emitted = (out >= 0).sum(axis=1)
        cols = base[:, None] + 1 + np.arange(gamma + 1)
        keep = np.arange(gamma + 1) < emitted[:, None]
        seq[np.repeat(active, keep.sum(axis=1)), cols[keep]] = out[keep]
        produced[active] += emitted
    return seq[:, 1 + prompt_len: 1 + prompt_len + max_new_tokens].copy()
