"""Causal models for the decode-loop properties: Markov tables and large-vocabulary hashed models."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from specdec_check.models import CausalModel, HashedMarkovModel, MarkovModel

from ._validation import check_argument, check_int, order_check
from ._vectors import (
    DEFAULT_MAX_WEIGHT,
    PAIR_CASES,
    _CASE_MIN_VOCAB,
    _check_cases,
    _draw_weights,
    _normalise,
    _pair_for_case,
    vocab_sizes,
)

__all__ = ["ModelPair", "hashed_markov_models", "markov_model_pairs", "markov_models"]

#: Largest number of table rows ``(V+1)**order`` a drawn Markov model may have (keeps examples small).
MAX_TABLE_ROWS = 400


def _check_order_vocab(min_order, max_order, min_vocab, max_vocab, vocab_size):
    check_int(min_order, "min_order", floor=1)
    check_int(max_order, "max_order", floor=1)
    order_check("order", 1, min_order, max_order)
    check_argument(max_order <= 2, "max_order={0} is not supported; Markov tables grow as (V+1)**order, use 1 or 2.",
                   max_order)
    check_int(vocab_size, "vocab_size", floor=1, allow_none=True)
    check_int(min_vocab, "min_vocab", floor=1)
    check_int(max_vocab, "max_vocab", floor=1)
    order_check("vocab", 1, min_vocab, max_vocab)
    lo = vocab_size if vocab_size is not None else min_vocab
    check_argument(
        (lo + 1) ** min_order <= MAX_TABLE_ROWS,
        "a Markov table of order {0} over V={1} has {2} rows, above the limit of {3}; lower min_order or the "
        "vocabulary size, or use hashed_markov_models() for large vocabularies.",
        min_order, lo, (lo + 1) ** min_order, MAX_TABLE_ROWS,
    )


def _fits(vocab, order):
    return (vocab + 1) ** order <= MAX_TABLE_ROWS


@st.composite
def _markov_models(draw, vocab_size, min_vocab, max_vocab, min_order, max_order, max_weight):
    order = draw(st.integers(min_order, max_order))
    if vocab_size is None:
        hi = max_vocab
        while hi > min_vocab and not _fits(hi, order):
            hi -= 1
        if not _fits(hi, order):
            order = min_order
        vocab = draw(vocab_sizes(min_vocab=min_vocab, max_vocab=hi))
    else:
        vocab = vocab_size
        if not _fits(vocab, order):
            order = min_order
    rows = (vocab + 1) ** order
    table = np.stack([_normalise(_draw_weights(draw, vocab, min_support=1, max_support=vocab, max_weight=max_weight))
                      for _ in range(rows)])
    return MarkovModel(table.reshape((vocab + 1,) * order + (vocab,)), order=order)


def markov_models(
    *,
    vocab_size: int | None = None,
    min_vocab: int = 2,
    max_vocab: int = 5,
    min_order: int = 1,
    max_order: int = 2,
    max_weight: int = DEFAULT_MAX_WEIGHT,
) -> st.SearchStrategy[MarkovModel]:
    """Order-1 and order-2 :class:`~specdec_check.models.MarkovModel` instances with integer-weight rows.

    * ``vocab_size`` fixes V; otherwise it is drawn from ``[min_vocab, max_vocab]``.
    * ``min_order`` / ``max_order`` bound the order (1 or 2). A table has ``(V+1)**order``
      rows (the extra context is start-of-sequence); when an order-2 table over the drawn V
      would exceed :data:`MAX_TABLE_ROWS` rows, the vocabulary is capped instead.
    * ``max_weight`` is the largest integer weight of one token in a row.

    Each row is drawn like :func:`probability_vectors` (zeros allowed, at least one
    positive entry), so examples shrink towards deterministic chains.
    """
    _check_order_vocab(min_order, max_order, min_vocab, max_vocab, vocab_size)
    check_int(max_weight, "max_weight", floor=1)
    return _markov_models(vocab_size, min_vocab, max_vocab, min_order, max_order, max_weight)


@dataclass(frozen=True, eq=False)
class ModelPair:
    """A target and a draft causal model over one vocabulary, and the per-context case that related them."""

    target: CausalModel
    draft: CausalModel
    case: str = "generic"

    @property
    def vocab_size(self) -> int:
        return int(self.target.vocab_size)

    def __repr__(self) -> str:
        return f"ModelPair(V={self.vocab_size}, order={self.target.order}, case={self.case!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis / IPython pretty-printing
        printer.text(repr(self))


@st.composite
def _markov_model_pairs(draw, vocab_size, min_vocab, max_vocab, min_order, max_order, max_weight, cases):
    case = draw(st.sampled_from(cases))
    order = draw(st.integers(min_order, max_order))
    lo = max(min_vocab, _CASE_MIN_VOCAB.get(case, 1))
    if vocab_size is None:
        hi = max_vocab
        while hi > lo and not _fits(hi, order):
            hi -= 1
        vocab = draw(vocab_sizes(min_vocab=lo, max_vocab=max(lo, hi)))
    else:
        vocab = vocab_size
    if not _fits(vocab, order):
        order = 1
    rows = (vocab + 1) ** order
    pairs = [_pair_for_case(draw, case, vocab, max_weight) for _ in range(rows)]
    shape = (vocab + 1,) * order + (vocab,)
    target = MarkovModel(np.stack([p.target_probs for p in pairs]).reshape(shape), order=order)
    draft = MarkovModel(np.stack([p.draft_probs for p in pairs]).reshape(shape), order=order)
    return ModelPair(target, draft, case)


def markov_model_pairs(
    *,
    vocab_size: int | None = None,
    min_vocab: int = 2,
    max_vocab: int = 4,
    min_order: int = 1,
    max_order: int = 2,
    max_weight: int = DEFAULT_MAX_WEIGHT,
    cases=None,
) -> st.SearchStrategy[ModelPair]:
    """A target and a draft :class:`~specdec_check.models.MarkovModel` of one order over one vocabulary.

    After every context the two next-token laws are a :func:`distribution_pairs` draw of
    the one ``case`` chosen for the example (``cases`` as in :func:`distribution_pairs`),
    e.g. ``identical`` gives draft == target and ``disjoint`` a draft whose every token the
    target rejects. Bounds as in :func:`markov_models`.
    """
    _check_order_vocab(min_order, max_order, min_vocab, max_vocab, vocab_size)
    check_int(max_weight, "max_weight", floor=1)
    explicit = cases is not None
    cases = _check_cases(cases, PAIR_CASES)
    top = vocab_size if vocab_size is not None else max_vocab
    if not explicit:
        cases = tuple(c for c in cases if _CASE_MIN_VOCAB.get(c, 1) <= top)
    too_big = [c for c in cases if _CASE_MIN_VOCAB.get(c, 1) > top]
    check_argument(not too_big, "case(s) {0} need at least 2 tokens; raise the vocabulary bound or drop them.",
                   too_big)
    return _markov_model_pairs(vocab_size, min_vocab, max_vocab, min_order, max_order, max_weight, cases)


def hashed_markov_models(
    *,
    min_vocab: int = 1000,
    max_vocab: int = 131072,
    min_prototypes: int = 1,
    max_prototypes: int = 16,
    min_order: int = 1,
    max_order: int = 2,
) -> st.SearchStrategy[HashedMarkovModel]:
    """Large-vocabulary :class:`~specdec_check.models.HashedMarkovModel` instances (memory ``K * V``).

    Each of the ``K`` prototype rows is a Zipf law over its own random token ranking,
    built by :meth:`HashedMarkovModel.random` from a drawn seed and exponent.

    * ``min_vocab`` / ``max_vocab`` bound V (ragged tile sizes, 128256 and 151936 reachable).
    * ``min_prototypes`` / ``max_prototypes`` bound K.
    * ``min_order`` / ``max_order`` bound the context length (1..4).
    """
    check_int(min_vocab, "min_vocab", floor=1)
    check_int(max_vocab, "max_vocab", floor=1)
    order_check("vocab", 1, min_vocab, max_vocab)
    check_int(min_prototypes, "min_prototypes", floor=1)
    check_int(max_prototypes, "max_prototypes", floor=1)
    order_check("prototypes", 1, min_prototypes, max_prototypes)
    check_int(min_order, "min_order", floor=1)
    check_int(max_order, "max_order", floor=1)
    order_check("order", 1, min_order, max_order)
    check_argument(max_order <= 4, "max_order={0} is above 4, the longest context HashedMarkovModel hashes.", max_order)
    check_argument(max_vocab * max_prototypes <= 2**25,
                   "max_vocab * max_prototypes = {0} floats is too large; lower max_prototypes or max_vocab.",
                   max_vocab * max_prototypes)
    return st.builds(
        lambda vocab, k, order, exponent, seed: HashedMarkovModel.random(
            vocab, num_prototypes=k, order=order, zipf_exponent=exponent, seed=seed),
        vocab_sizes(min_vocab=min_vocab, max_vocab=max_vocab),
        st.integers(min_prototypes, max_prototypes),
        st.integers(min_order, max_order),
        st.sampled_from((1.1, 0.8, 1.5)),
        st.integers(0, 2**32 - 1),
    )
