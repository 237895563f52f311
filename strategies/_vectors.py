"""Probability vectors and target/draft pairs built from small integer weights.

Every vector is ``w / w.sum()`` for a vector ``w`` of small non-negative
integers, so values are exact rationals rounded once, shrinking moves towards
few tokens and small weights, and no example is ever filtered out. Adversarial
cases (identical rows, disjoint supports, one-hot rows, ...) are branches of a
``sampled_from`` whose first entry is the generic case, so the shrinker can
switch them off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from ._validation import check_argument, check_int, order_check

__all__ = [
    "PAIR_CASES",
    "TILE_SIZES",
    "DistributionPair",
    "distribution_pairs",
    "large_vocab_pairs",
    "probability_vectors",
    "vocab_sizes",
]

#: Tile widths common in GPU kernels; vocabulary sizes one off a multiple of these
#: exercise ragged last tiles (masked loads, partial reductions).
TILE_SIZES = (8, 16, 32, 64, 128, 256, 1024)

#: Target/draft relations drawn by :func:`distribution_pairs`, the generic one first
#: (the shrinker moves towards the start of this tuple).
PAIR_CASES = (
    "generic",
    "identical",
    "one_hot_target",
    "one_hot_draft",
    "zeros",
    "disjoint",
    "near_equal",
    "opposite",
    "tail_heavy",
)

# Smallest vocabulary each case needs.
_CASE_MIN_VOCAB = {"zeros": 2, "disjoint": 2, "near_equal": 2, "opposite": 2}

#: Default largest integer weight of one token before normalisation.
DEFAULT_MAX_WEIGHT = 16


def _short(vec: np.ndarray) -> str:
    return "[" + " ".join(f"{x:.4g}" for x in vec) + "]"


@dataclass(frozen=True, eq=False)
class DistributionPair:
    """A target law p and a draft law q over one vocabulary, and the case that built them.

    ``target_probs`` and ``draft_probs`` are read-only float64 [V] arrays summing to 1
    (within rounding).
    """

    target_probs: np.ndarray = field(repr=False)
    draft_probs: np.ndarray = field(repr=False)
    case: str = "generic"

    @property
    def vocab_size(self) -> int:
        return int(self.target_probs.shape[-1])

    @property
    def acceptance(self) -> float:
        """``sum_x min(p(x), q(x))``: the probability that a drafted token is accepted."""
        return float(np.minimum(self.target_probs, self.draft_probs).sum())

    @property
    def tv(self) -> float:
        """Total variation distance between target and draft (``1 - acceptance``)."""
        return float(0.5 * np.abs(self.target_probs - self.draft_probs).sum())

    def __repr__(self) -> str:
        if self.vocab_size <= 8:
            body = f"target={_short(self.target_probs)}, draft={_short(self.draft_probs)}"
        else:
            body = f"V={self.vocab_size}, acceptance={self.acceptance:.4g}"
        return f"DistributionPair({body}, case={self.case!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis / IPython pretty-printing
        printer.text(repr(self))


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    arr.setflags(write=False)
    return arr


def _normalise(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    return w / w.sum()


def _check_vocab_bounds(vocab_size, min_vocab, max_vocab, floor=1):
    check_int(vocab_size, "vocab_size", floor=floor, allow_none=True)
    check_int(min_vocab, "min_vocab", floor=floor)
    check_int(max_vocab, "max_vocab", floor=floor)
    order_check("vocab", floor, min_vocab, max_vocab)


def vocab_sizes(*, min_vocab: int = 1, max_vocab: int = 8) -> st.SearchStrategy[int]:
    """Vocabulary sizes in ``[min_vocab, max_vocab]``, including sizes one off a tile multiple.

    * ``min_vocab`` is the smallest size, at least 1.
    * ``max_vocab`` is the largest size.

    Besides uniform integers, a second branch draws from the sizes ``k * t - 1`` and
    ``k * t + 1`` (``t`` in :data:`TILE_SIZES`, ``k`` in 1..4) that fall inside the
    bounds, plus 128256 (Llama 3) and 151936 (Qwen 2) when in range.
    """
    check_int(min_vocab, "min_vocab", floor=1)
    check_int(max_vocab, "max_vocab", floor=1)
    order_check("vocab", 1, min_vocab, max_vocab)
    ragged = {k * t + d for t in TILE_SIZES for k in (1, 2, 3, 4) for d in (-1, 1)} | {128256, 151936}
    ragged = sorted(v for v in ragged if min_vocab <= v <= max_vocab)
    base = st.integers(min_vocab, max_vocab)
    return st.one_of(base, st.sampled_from(ragged)) if ragged else base


def _draw_weights(draw, vocab: int, *, min_support: int, max_support: int, max_weight: int) -> np.ndarray:
    """Integer weights over ``vocab`` tokens with between ``min_support`` and ``max_support`` positive entries.

    Drawn freely, then repaired deterministically (no filtering): missing support is
    added as weight 1 on the first zero entries; excess support is removed from the end.
    """
    w = np.array(draw(st.lists(st.integers(0, max_weight), min_size=vocab, max_size=vocab)), dtype=np.int64)
    positive = np.flatnonzero(w > 0)
    if positive.size < min_support:
        zeros = np.flatnonzero(w == 0)
        w[zeros[: min_support - positive.size]] = 1
    elif positive.size > max_support:
        w[positive[max_support:]] = 0
    return w


def _tail_heavy_from(weights: np.ndarray, max_weight: int) -> np.ndarray:
    """Every token positive, the mode holding at most half the mass: weight 1 everywhere, ``h <= V - 1`` at the mode.

    The mode and ``h`` are read off already-drawn ``weights`` (its argmax and largest
    entry), so this branch draws no more than the generic one and shrinks the same way.
    """
    vocab = weights.size
    w = np.ones(vocab, dtype=np.int64)
    w[int(np.argmax(weights))] = int(np.clip(weights.max(), 1, max(1, min(max_weight, vocab - 1))))
    return w


def _one_hot(vocab: int, index: int) -> np.ndarray:
    out = np.zeros(vocab)
    out[index] = 1.0
    return out


@st.composite
def _probability_vectors(draw, vocab_size, min_vocab, max_vocab, min_support, max_support, max_weight, tail_heavy):
    vocab = vocab_size if vocab_size is not None else draw(
        vocab_sizes(min_vocab=max(min_vocab, min_support), max_vocab=max_vocab))
    hi = vocab if max_support is None else min(max_support, vocab)
    weights = _draw_weights(draw, vocab, min_support=min_support, max_support=hi, max_weight=max_weight)
    # Decided after the weights are drawn, so switching the branch off never lengthens the example.
    if tail_heavy and hi == vocab and draw(st.booleans()):
        weights = _tail_heavy_from(weights, max_weight)
    return _frozen(_normalise(weights))


def probability_vectors(
    *,
    vocab_size: int | None = None,
    min_vocab: int = 1,
    max_vocab: int = 8,
    min_support: int = 1,
    max_support: int | None = None,
    max_weight: int = DEFAULT_MAX_WEIGHT,
    allow_tail_heavy: bool = True,
) -> st.SearchStrategy[np.ndarray]:
    """Read-only float64 probability vectors ``w / w.sum()`` for small integer weights ``w``.

    * ``vocab_size`` fixes the length; otherwise it is drawn by :func:`vocab_sizes`
      from ``[min_vocab, max_vocab]``.
    * ``min_support`` / ``max_support`` bound the number of tokens with positive
      probability (``max_support`` defaults to the vocabulary size). ``min_support=1,
      max_support=1`` gives one-hot vectors.
    * ``max_weight`` is the largest integer weight of one token (at least 1).
    * ``allow_tail_heavy`` enables a branch where every token is positive and the mode
      holds at most half the mass.

    Examples shrink towards ``[1, 0, ..., 0]``.
    """
    _check_vocab_bounds(vocab_size, min_vocab, max_vocab)
    check_int(min_support, "min_support", floor=1)
    check_int(max_support, "max_support", floor=1, allow_none=True)
    check_int(max_weight, "max_weight", floor=1)
    check_argument(isinstance(allow_tail_heavy, bool), "allow_tail_heavy must be True or False, got {0!r}.",
                   allow_tail_heavy)
    if max_support is not None:
        order_check("support", 1, min_support, max_support)
    top = vocab_size if vocab_size is not None else max_vocab
    check_argument(
        min_support <= top,
        "min_support={0} is larger than the largest vocabulary ({1}); lower min_support or raise {2}.",
        min_support, top, "vocab_size" if vocab_size is not None else "max_vocab",
    )
    return _probability_vectors(vocab_size, min_vocab, max_vocab, min_support, max_support, max_weight,
                                allow_tail_heavy)


def _repair_support(w: np.ndarray, min_support: int) -> np.ndarray:
    """Give ``w`` at least ``min_support`` positive entries (weight 1 on its first zeros)."""
    w = w.copy()
    zeros = np.flatnonzero(w == 0)
    missing = min_support - (w.size - zeros.size)
    if missing > 0:
        w[zeros[:missing]] = 1
    return w


def _pair_for_case(draw, case: str, vocab: int, max_weight: int) -> DistributionPair:
    """Draw one target/draft pair of the given case over ``vocab`` tokens.

    Every case starts from the same two weight vectors ``wt`` and ``wd`` and draws its
    extras after them, so the generic case is the shortest choice sequence and the
    shrinker can always switch an adversarial case off.
    """
    wt = _draw_weights(draw, vocab, min_support=1, max_support=vocab, max_weight=max_weight)
    wd = _draw_weights(draw, vocab, min_support=1, max_support=vocab, max_weight=max_weight)
    if case == "generic":
        target, draft = _normalise(wt), _normalise(wd)
    elif case == "identical":
        target = _normalise(wt)
        draft = target.copy()
    elif case == "one_hot_target":
        target, draft = _one_hot(vocab, draw(st.integers(0, vocab - 1))), _normalise(wd)
    elif case == "one_hot_draft":
        target, draft = _normalise(wt), _one_hot(vocab, draw(st.integers(0, vocab - 1)))
    elif case == "zeros":
        # p(a) = 0 < q(a) and q(b) = 0 < p(b): zeros on both sides, each side keeps mass.
        a = draw(st.integers(0, vocab - 1))
        b = (a + draw(st.integers(1, vocab - 1))) % vocab
        wt, wd = wt.copy(), wd.copy()
        wt[a], wd[b] = 0, 0
        wt[b], wd[a] = max(wt[b], 1), max(wd[a], 1)
        target, draft = _normalise(wt), _normalise(wd)
    elif case == "disjoint":
        member = np.array(draw(st.lists(st.booleans(), min_size=vocab, max_size=vocab)))
        if member.all():
            member[-1] = False
        if not member.any():
            member[0] = True
        wt, wd = np.where(member, wt, 0), np.where(member, 0, wd)
        if wt.sum() == 0:
            wt[np.flatnonzero(member)[0]] = 1
        if wd.sum() == 0:
            wd[np.flatnonzero(~member)[0]] = 1
        target, draft = _normalise(wt), _normalise(wd)
    elif case == "near_equal":
        wt = _repair_support(wt, 2)
        target = _normalise(wt)
        if draw(st.booleans()):
            # Same rationals, rounded through a different expression: equal or 1 ulp apart.
            draft = wt.astype(np.float64) * (1.0 / wt.sum())
        else:
            support = np.flatnonzero(wt > 0)
            pos = draw(st.integers(0, support.size - 1))
            i = int(support[pos])
            j = int(support[(pos + draw(st.integers(1, support.size - 1))) % support.size])
            draft = target.copy()
            draft[i] = np.nextafter(draft[i], 2.0)  # q > p by one ulp at i ...
            draft[j] = np.nextafter(draft[j], -1.0)  # ... and q < p by one ulp at j
    elif case == "opposite":
        wt = _repair_support(wt, 2)
        order = np.argsort(wt, kind="stable")
        wd = np.empty_like(wt)
        wd[order] = wt[order[::-1]]  # the target's largest weight goes to its smallest token
        target, draft = _normalise(wt), _normalise(wd)
    elif case == "tail_heavy":
        target = _normalise(_tail_heavy_from(wt, max_weight))
        draft = _normalise(_tail_heavy_from(wd, max_weight))
    else:  # pragma: no cover - validated by the callers
        raise AssertionError(case)
    return DistributionPair(_frozen(target), _frozen(draft), case)


def _check_cases(cases, valid=PAIR_CASES) -> tuple[str, ...]:
    if cases is None:
        return tuple(valid)
    check_argument(
        not isinstance(cases, str) and hasattr(cases, "__iter__"),
        "cases must be a collection of case names such as {0!r}, not {1!r}; wrap a single name in a list.",
        list(valid[:2]), cases,
    )
    cases = tuple(cases)
    check_argument(len(cases) > 0, "cases must name at least one case; choose from {0}.", list(valid))
    unknown = [c for c in cases if c not in valid]
    check_argument(not unknown, "unknown case(s) {0}; choose from {1}.", unknown, list(valid))
    return tuple(c for c in valid if c in cases)  # canonical order: generic first


@st.composite
def _distribution_pairs(draw, vocab_size, min_vocab, max_vocab, max_weight, cases):
    case = draw(st.sampled_from(cases))
    if vocab_size is not None:
        vocab = vocab_size
    else:
        vocab = draw(vocab_sizes(min_vocab=max(min_vocab, _CASE_MIN_VOCAB.get(case, 1)), max_vocab=max_vocab))
    return _pair_for_case(draw, case, vocab, max_weight)


def distribution_pairs(
    *,
    vocab_size: int | None = None,
    min_vocab: int = 1,
    max_vocab: int = 8,
    max_weight: int = DEFAULT_MAX_WEIGHT,
    cases=None,
) -> st.SearchStrategy[DistributionPair]:
    """A target law p and a draft law q over one vocabulary, as a :class:`DistributionPair`.

    * ``vocab_size`` fixes V; otherwise V is drawn from ``[min_vocab, max_vocab]`` by
      :func:`vocab_sizes` (ragged tile sizes included).
    * ``max_weight`` is the largest integer weight of one token before normalising.
    * ``cases`` restricts the relations drawn (default: all of :data:`PAIR_CASES`):
      ``generic`` (independent rows), ``identical`` (q == p), ``one_hot_target``,
      ``one_hot_draft``, ``zeros`` (p(a) = 0 < q(a) and q(b) = 0 < p(b)), ``disjoint``
      (no token has p > 0 and q > 0), ``near_equal`` (q within one ulp of p per entry,
      so ``max(0, p - q)`` sums to a few ulps or to 0), ``opposite`` (q ranks tokens in
      the reverse order of p), ``tail_heavy`` (every token positive, the mode holding at
      most half the mass). Cases that need two tokens draw V >= 2.

    Examples shrink towards the ``generic`` case over few tokens.
    """
    _check_vocab_bounds(vocab_size, min_vocab, max_vocab)
    check_int(max_weight, "max_weight", floor=1)
    explicit = cases is not None
    cases = _check_cases(cases)
    top = vocab_size if vocab_size is not None else max_vocab
    if not explicit:  # the default: every case the vocabulary allows
        cases = tuple(c for c in cases if _CASE_MIN_VOCAB.get(c, 1) <= top)
    too_big = [c for c in cases if _CASE_MIN_VOCAB.get(c, 1) > top]
    check_argument(
        not too_big,
        "case(s) {0} need at least 2 tokens but the vocabulary is at most {1}; raise {2} or drop those cases.",
        too_big, top, "vocab_size" if vocab_size is not None else "max_vocab",
    )
    return _distribution_pairs(vocab_size, min_vocab, max_vocab, max_weight, cases)


#: Cases available from :func:`large_vocab_pairs`.
LARGE_PAIR_CASES = ("generic", "identical", "one_hot_target", "disjoint", "near_equal", "tail_heavy")


def _zipf_row(rng: np.random.Generator, vocab: int, exponent: float) -> np.ndarray:
    row = np.empty(vocab)
    row[rng.permutation(vocab)] = np.arange(1, vocab + 1, dtype=np.float64) ** -exponent
    return row / row.sum()


@st.composite
def _large_vocab_pairs(draw, min_vocab, max_vocab, cases):
    case = draw(st.sampled_from(cases))
    vocab = draw(vocab_sizes(min_vocab=max(min_vocab, 2), max_vocab=max_vocab))
    seed = draw(st.integers(0, 2**32 - 1))
    exponent = draw(st.sampled_from((1.1, 0.8, 1.5)))
    rng = np.random.default_rng(seed)
    target = _zipf_row(rng, vocab, exponent if case != "tail_heavy" else 0.5)
    if case == "generic":
        draft = _zipf_row(rng, vocab, exponent)
    elif case == "identical":
        draft = target.copy()
    elif case == "one_hot_target":
        draft = target
        target = _one_hot(vocab, draw(st.integers(0, vocab - 1)))
    elif case == "disjoint":
        cut = draw(st.integers(1, vocab - 1))
        draft = target.copy()
        target[cut:] = 0.0
        draft[:cut] = 0.0
        target, draft = target / target.sum(), draft / draft.sum()
    elif case == "near_equal":
        draft = target.astype(np.float32).astype(np.float64)  # p rounded through float32, renormalised
        draft /= draft.sum()
    else:  # tail_heavy
        draft = _zipf_row(rng, vocab, 0.5)
    return DistributionPair(_frozen(target), _frozen(draft), case)


def large_vocab_pairs(*, min_vocab: int = 1000, max_vocab: int = 131072, cases=None) -> st.SearchStrategy[DistributionPair]:
    """Target/draft pairs over large vocabularies (thousands to ~150k tokens).

    Rows are Zipf laws over random token rankings drawn from a Hypothesis-drawn seed
    (drawing V integers per row would exceed Hypothesis' example-size limits).

    * ``min_vocab`` / ``max_vocab`` bound V (drawn by :func:`vocab_sizes`, so sizes one
      off a tile multiple, 128256 and 151936 are reachable).
    * ``cases`` restricts the relations (default all of :data:`LARGE_PAIR_CASES`).
    """
    check_int(min_vocab, "min_vocab", floor=2)
    check_int(max_vocab, "max_vocab", floor=2)
    order_check("vocab", 2, min_vocab, max_vocab)
    check_argument(max_vocab <= 2**20, "max_vocab={0} is above 2**20; large_vocab_pairs builds dense rows.", max_vocab)
    return _large_vocab_pairs(min_vocab, max_vocab, _check_cases(cases, LARGE_PAIR_CASES))
