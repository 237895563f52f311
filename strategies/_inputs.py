"""Ready-to-call verifier inputs: draft ids drawn from the draft rows, target rows along the drafted path."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from ._configs import SpecConfig
from ._validation import check_argument, check_int, order_check
from ._vectors import (
    DEFAULT_MAX_WEIGHT,
    PAIR_CASES,
    _CASE_MIN_VOCAB,
    _check_cases,
    _draw_weights,
    _frozen,
    _normalise,
    _pair_for_case,
    vocab_sizes,
)

__all__ = ["INPUT_CASES", "VerifierInputs", "verifier_inputs"]

#: Cases drawn by :func:`verifier_inputs`: the pair cases (every position of the
#: example uses that relation), ``mixed`` (each position draws its own), and
#: ``markov_path`` (rows read off an order-1 target/draft Markov pair along the drafted path).
INPUT_CASES = PAIR_CASES + ("mixed", "markov_path")


@dataclass(frozen=True, eq=False)
class VerifierInputs:
    """Arguments for one verifier call (generator excepted), and the case that built them.

    ``draft_token_ids`` int64 [B, gamma]; ``draft_probs`` float64 [B, gamma, V];
    ``target_probs`` float64 [B, gamma+1, V] (the last row is the bonus position).
    Every drafted id has positive draft probability.
    """

    draft_token_ids: np.ndarray = field(repr=False)
    draft_probs: np.ndarray = field(repr=False)
    target_probs: np.ndarray = field(repr=False)
    case: str = "generic"

    @property
    def rows(self) -> int:
        return int(self.draft_token_ids.shape[0])

    @property
    def gamma(self) -> int:
        return int(self.draft_token_ids.shape[1])

    @property
    def vocab_size(self) -> int:
        return int(self.target_probs.shape[-1])

    @property
    def config(self) -> SpecConfig:
        return SpecConfig(gamma=self.gamma, rows_per_call=self.rows)

    def kwargs(self) -> dict:
        """Fresh writable copies, as keywords for ``verify(**inputs.kwargs(), generator=g)``."""
        return {
            "draft_token_ids": self.draft_token_ids.copy(),
            "draft_probs": self.draft_probs.copy(),
            "target_probs": self.target_probs.copy(),
        }

    def __repr__(self) -> str:
        return f"VerifierInputs(B={self.rows}, gamma={self.gamma}, V={self.vocab_size}, case={self.case!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis / IPython pretty-printing
        printer.text(repr(self))


def _drafted(draw, draft_row: np.ndarray) -> int:
    """A token index into the support of ``draft_row`` (shrinks towards the smallest supported id)."""
    support = np.flatnonzero(draft_row > 0)
    return int(support[draw(st.integers(0, support.size - 1))])


@st.composite
def _verifier_inputs(draw, gamma_bounds, row_bounds, vocab_size, vocab_bounds, max_weight, cases):
    case = draw(st.sampled_from(cases))
    gamma = draw(st.integers(*gamma_bounds))
    rows = draw(st.integers(*row_bounds))
    if vocab_size is not None:
        vocab = vocab_size
    else:
        need = _CASE_MIN_VOCAB.get(case, 1)
        vocab = draw(vocab_sizes(min_vocab=max(vocab_bounds[0], need), max_vocab=vocab_bounds[1]))
    ids = np.zeros((rows, gamma), dtype=np.int64)
    draft = np.zeros((rows, gamma, vocab))
    target = np.zeros((rows, gamma + 1, vocab))
    if case == "markov_path":
        tables = [np.stack([_normalise(_draw_weights(draw, vocab, min_support=1, max_support=vocab,
                                                     max_weight=max_weight)) for _ in range(vocab + 1)])
                  for _ in range(2)]
        target_table, draft_table = tables
        for b in range(rows):
            ctx = draw(st.integers(0, vocab))  # vocab = start of sequence
            for i in range(gamma):
                draft[b, i], target[b, i] = draft_table[ctx], target_table[ctx]
                ids[b, i] = ctx = _drafted(draw, draft[b, i])
            target[b, gamma] = target_table[ctx]
    else:
        feasible = [c for c in PAIR_CASES if c in cases and _CASE_MIN_VOCAB.get(c, 1) <= vocab] or ["generic"]
        for b in range(rows):
            for i in range(gamma + 1):
                pos_case = draw(st.sampled_from(feasible)) if case == "mixed" else case
                pair = _pair_for_case(draw, pos_case, vocab, max_weight)
                target[b, i] = pair.target_probs
                if i < gamma:
                    draft[b, i] = pair.draft_probs
                    ids[b, i] = _drafted(draw, draft[b, i])
    ids.setflags(write=False)
    return VerifierInputs(ids, _frozen(draft), _frozen(target), case)


def verifier_inputs(
    *,
    min_gamma: int = 0,
    max_gamma: int = 4,
    min_rows: int = 1,
    max_rows: int = 4,
    vocab_size: int | None = None,
    min_vocab: int = 1,
    max_vocab: int = 8,
    max_weight: int = DEFAULT_MAX_WEIGHT,
    cases=None,
) -> st.SearchStrategy[VerifierInputs]:
    """Inputs for one verifier call, as a :class:`VerifierInputs`.

    * ``min_gamma`` / ``max_gamma`` bound the drafted tokens per row; ``min_rows`` /
      ``max_rows`` the rows of the batch.
    * ``vocab_size`` fixes V; otherwise V is drawn from ``[min_vocab, max_vocab]``.
    * ``cases`` restricts the construction (default all of :data:`INPUT_CASES`): a pair
      case from :data:`~specdec_check.strategies.PAIR_CASES` relates target and draft at
      every position (the bonus row is the target of one more such pair); ``mixed`` draws
      a case per position; ``markov_path`` reads both rows off order-1 Markov tables after
      the context reached by the drafted path.

    Drafted ids are Hypothesis draws indexing the support of their draft row, so they
    always have positive draft probability and shrink towards the smallest such id.
    """
    for name, value, floor in (("min_gamma", min_gamma, 0), ("max_gamma", max_gamma, 0),
                               ("min_rows", min_rows, 1), ("max_rows", max_rows, 1)):
        check_int(value, name, floor=floor)
    order_check("gamma", 0, min_gamma, max_gamma)
    order_check("rows", 1, min_rows, max_rows)
    check_int(vocab_size, "vocab_size", floor=1, allow_none=True)
    check_int(min_vocab, "min_vocab", floor=1)
    check_int(max_vocab, "max_vocab", floor=1)
    order_check("vocab", 1, min_vocab, max_vocab)
    check_int(max_weight, "max_weight", floor=1)
    explicit = cases is not None
    cases = _check_cases(cases, INPUT_CASES)
    top = vocab_size if vocab_size is not None else max_vocab
    if not explicit:  # the default: every case the vocabulary allows
        cases = tuple(c for c in cases if _CASE_MIN_VOCAB.get(c, 1) <= top)
    too_big = [c for c in cases if _CASE_MIN_VOCAB.get(c, 1) > top]
    check_argument(not too_big, "case(s) {0} need at least 2 tokens but the vocabulary is at most {1}; raise {2} "
                   "or drop those cases.", too_big, top, "vocab_size" if vocab_size is not None else "max_vocab")
    check_argument((max_rows * (max_gamma + 1) * top) <= 200_000,
                   "max_rows * (max_gamma + 1) * V = {0} probabilities per example is too many for Hypothesis to "
                   "draw; lower max_rows, max_gamma or the vocabulary.", max_rows * (max_gamma + 1) * top)
    return _verifier_inputs((min_gamma, max_gamma), (min_rows, max_rows), vocab_size, (min_vocab, max_vocab),
                            max_weight, cases)
