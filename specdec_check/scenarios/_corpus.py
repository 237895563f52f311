"""The corpus-bigram example: a small, fully printable target/draft pair."""

from __future__ import annotations

import numpy as np

from ..models import MarkovModel, mix

__all__ = ["CORPUS", "corpus_bigram", "corpus_vocabulary"]

#: The 80-character corpus (Hamlet, Act III scene 1).
CORPUS = "to be or not to be that is the question whether tis nobler in the mind to suffer"


def corpus_vocabulary() -> tuple[str, ...]:
    """The sorted distinct characters of :data:`CORPUS` (18 of them); token id = position here."""
    return tuple(sorted(set(CORPUS)))


def corpus_bigram(w: float) -> tuple[MarkovModel, "MixtureModel"]:  # noqa: F821
    """Return ``(target, draft)`` for the corpus-bigram example.

    The target is the order-1 character bigram of :data:`CORPUS` with add-one (Laplace)
    counts on every (context, token) pair; the first character is counted after the
    start context. The draft is ``w * target + (1 - w) * unigram`` where the unigram is
    the add-one-smoothed character frequency of the corpus (it ignores context).
    """
    w = float(w)
    if not 0.0 <= w <= 1.0:
        raise ValueError(f"w must lie in [0, 1]; got {w}.")
    vocab = corpus_vocabulary()
    index = {ch: i for i, ch in enumerate(vocab)}
    ids = np.array([index[ch] for ch in CORPUS])
    size = len(vocab)
    counts = np.ones((size + 1, size))
    np.add.at(counts, (np.concatenate([[size], ids[:-1]]), ids), 1.0)
    target = MarkovModel(counts / counts.sum(axis=1, keepdims=True))
    unigram = np.bincount(ids, minlength=size) + 1.0
    return target, mix(target, unigram / unigram.sum(), w)
