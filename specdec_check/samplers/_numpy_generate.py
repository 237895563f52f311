"""The reference speculative decode loop in numpy."""

from __future__ import annotations

import numpy as np

from .._tables import categorical
from .._validation import as_token_array, check_gamma
from ..models import last_token_probs, vocab_size_of
from ._numpy_verify import numpy_verify

__all__ = ["check_generate_args", "numpy_generate"]


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
