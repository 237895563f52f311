"""The exact law of a token sampler: logits (or probabilities) processed by temperature, top-k, top-p and
min-p in a declared order, with a declared rule for ties at each boundary.

One row's law, for a declared :class:`TokenProcessing` (each step sees the law the previous steps left):

- ``temperature`` T > 0 divides the logits by T; T = 0 makes the row greedy: the law is one-hot at the
  argmax of the *raw* logits, the tie among equal maxima decided by the declared greedy rule (``argmax`` of
  numpy and torch returns the lowest index);
- ``top_k`` k (0 = off) keeps the k most probable tokens (``transformers``' ``TopKLogitsWarper`` and vLLM v1's
  ``apply_top_k_top_p``: every logit at least the k-th largest, ties kept);
- ``top_p`` p (1.0 = off) keeps the smallest most-probable prefix whose mass reaches p, computed on the law
  the earlier steps left, renormalised: a token is kept iff the mass ranked strictly before it is below p
  (``TopPLogitsWarper``: tokens whose ascending cumulative mass is at most 1 - p are removed); a kernel may
  instead keep a token while that mass is *at most* p (SGLang's torch sampler: the smallest prefix whose mass
  exceeds p), which differs only when a prefix's mass is exactly p: declared by ``nucleus``;
- ``min_p`` m (0 = off) keeps the tokens whose probability is at least m times the largest
  (``MinPLogitsWarper``; Nguyen et al. 2024, "Min-p sampling"), equality kept.

The processed law is the softmax of what is left (Holtzman et al. 2020 for top-p; Fan et al. 2018 for
top-k). Ties at a top-k or top-p boundary are decided by a declared rule: ``keep`` every token tied with
the boundary token (transformers, vLLM's top-k), ``low_index`` / ``high_index`` (a total order on
probability, then token index: FlashInfer's fix of #3774 keeps exactly k), or ``any`` (the kernel's sort
decides: the law is not determined there). A boundary the kernel's own rounding can move (a gap or a mass
margin within :data:`BOUNDARY_TOLERANCE`, relative, but not exactly 0) is ambiguous too. An ambiguous row's
law is not tested; its *support* (the tokens some reading of its boundaries keeps) still is: a token
outside it has probability zero under every reading.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._settings import TIE_RULES, TOKEN_INPUTS, TOKEN_STEPS

__all__ = ["BOUNDARY_TOLERANCE", "NUCLEUS_RULES", "TIE_RULES", "TOKEN_INPUTS", "TOKEN_STEPS", "TokenLaws", "TokenProcessing",
           "token_laws"]

#: The boundaries a tie rule is declared for.
TIE_STEPS = ("top_k", "top_p", "greedy")
#: Where a nucleus stops when a prefix's mass is exactly top_p: at the prefix that *reaches* p (the mass before
#: a kept token is below p: transformers, vLLM) or past it, at the prefix that *exceeds* p (at most p).
NUCLEUS_RULES = ("reaches", "exceeds")
#: A boundary decided by a margin this small (relative to the values compared), but not exactly 0, is left to
#: the kernel: a float32 kernel's softmax and cumulative sums are within ~1e-7 relative of the float64
#: oracle's, and 1e-6 leaves a factor of 10. An exactly 0 margin (exact binary fractions: every dtype computes
#: them exactly) is decided by the declared comparison.
BOUNDARY_TOLERANCE = 1e-6


def _tie_pairs(ties) -> tuple:
    if isinstance(ties, str):
        ties = {"top_k": ties, "top_p": ties}
    ties = dict(ties)
    unknown = sorted(set(ties) - set(TIE_STEPS))
    if unknown:
        raise ValueError(f"ties are declared for {TIE_STEPS}; got {unknown}.")
    bad = {k: v for k, v in ties.items() if v not in TIE_RULES}
    if bad:
        raise ValueError(f"a tie rule must be one of {TIE_RULES}; got {bad}.")
    merged = {"top_k": "keep", "top_p": "keep", "greedy": "low_index", **ties}
    if merged["greedy"] == "keep":
        raise ValueError("greedy ties cannot be 'keep' (greedy emits one token): use low_index, high_index or any.")
    return tuple((step, merged[step]) for step in TIE_STEPS)


@dataclass(frozen=True)
class TokenProcessing:
    """What a token sampler takes and how it turns a row into its law (see the module docstring).

    ``inputs``: "logits" or "probs" (the keyword the sampler takes); ``order``: the steps of
    :data:`TOKEN_STEPS` it applies, in its order (each one it lists is a keyword it takes, one value per
    row: temperature 0 = greedy, top_k 0 = off, top_p 1.0 = off, min_p 0 = off); ``ties``: a rule of
    :data:`TIE_RULES` for the top-k and top-p boundaries, or a mapping of ``top_k`` / ``top_p`` / ``greedy``
    to rules (default: keep ties, greedy to the lowest index); ``indices``: the sampler also takes
    ``indices`` [B], output ``i`` drawn from row ``indices[i]`` of the logits with the parameters of output
    ``i`` (FlashInfer's convention: a row may serve several outputs); ``nucleus``: "reaches" (default) or
    "exceeds" (where a nucleus whose mass is exactly top_p stops; see the module docstring).
    """

    inputs: str = "logits"
    order: tuple = ("temperature", "top_k", "top_p")
    ties: object = "keep"
    indices: bool = False
    nucleus: str = "reaches"

    def __post_init__(self):
        if self.inputs not in TOKEN_INPUTS:
            raise ValueError(f"inputs must be one of {TOKEN_INPUTS}; got {self.inputs!r}.")
        order = (self.order,) if isinstance(self.order, str) else tuple(self.order)
        unknown = [s for s in order if s not in TOKEN_STEPS]
        if unknown:
            raise ValueError(f"unknown processing step(s) {unknown}; choose from {TOKEN_STEPS}.")
        if len(set(order)) != len(order):
            raise ValueError(f"processing order {order} repeats a step; list each step once.")
        if self.inputs == "probs" and "temperature" in order:
            raise ValueError("a sampler of probabilities applies no temperature: drop 'temperature' from the order "
                             "(or take logits: inputs='logits').")
        if self.nucleus not in NUCLEUS_RULES:
            raise ValueError(f"nucleus must be one of {NUCLEUS_RULES}; got {self.nucleus!r}.")
        if not isinstance(self.indices, bool):
            raise TypeError(f"indices must be True or False; got {self.indices!r}.")
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "ties", _tie_pairs(self.ties))

    def tie(self, step: str) -> str:
        """The declared tie rule of ``step`` ("top_k", "top_p" or "greedy")."""
        return dict(self.ties)[step]

    @property
    def greedy(self) -> bool:
        """Whether rows may be greedy (temperature 0): only where the sampler takes a temperature."""
        return "temperature" in self.order

    def keywords(self) -> tuple:
        """The keywords the sampler is called with, ``generator`` last."""
        return (self.inputs, *self.order, *(("indices",) if self.indices else ()), "generator")

    def describe(self) -> str:
        rules = ", ".join(f"{step} ties: {rule}" for step, rule in self.ties
                          if step != "greedy" or self.greedy)
        return (f"{self.inputs} -> " + " -> ".join(self.order or ("(none)",)) + " -> sample"
                + f" ({rules}" + (", indices" if self.indices else "")
                + (f", the nucleus {self.nucleus} top_p" if self.nucleus != "reaches" and "top_p" in self.order else "")
                + ")")


@dataclass(frozen=True)
class TokenLaws:
    """The exact laws of a table of rows: ``law`` float64 [R, V] (for an ambiguous row, its declared reading),
    ``support`` bool [R, V] (the tokens some reading of the row's boundaries keeps: the impossible-event test's
    set), ``ambiguous`` bool [R] (the law is not determined: not tested) and ``reasons`` (why, per row; '')."""

    law: np.ndarray
    support: np.ndarray
    ambiguous: np.ndarray
    reasons: tuple


def _order(values, alive, rule):
    """Alive token ids by value descending, ties by index (high first for ``high_index``, else low first)."""
    ids = np.flatnonzero(alive)
    key = ids if rule != "high_index" else -ids
    return ids[np.lexsort((key, -values[ids]))]


def _near(a, b) -> bool:
    """Whether ``a`` and ``b`` differ by a margin the kernel's rounding can erase (and are not equal)."""
    gap = abs(a - b)
    return 0 < gap <= BOUNDARY_TOLERANCE * max(1.0, abs(a), abs(b))


def _softmax(z):
    finite = np.isfinite(z)
    out = np.zeros_like(z)
    if finite.any():
        e = np.exp(z[finite] - z[finite].max())
        out[finite] = e / e.sum()
    return out


def _top_k(z, k, rule, inclusive, notes):
    """Keep the k most probable tokens of ``z`` (ties at the boundary by ``rule``; see the module docstring)."""
    alive = np.isfinite(z)
    if not 0 < k < alive.sum():
        return z
    ranked = _order(z, alive, rule)
    kth, next_ = z[ranked[k - 1]], z[ranked[k]]
    near = _near(kth, next_)
    if kth == next_ and rule == "any":
        notes.append(f"top-k boundary tie (k = {k})")
    if near:
        notes.append(f"top-k boundary within rounding (k = {k})")
    if kth == next_ and (rule == "keep" or (rule == "any" and inclusive)):
        keep = z >= kth
    else:
        keep = np.zeros(z.size, dtype=bool)
        keep[ranked[:k]] = True
    if near and inclusive:
        keep |= z >= next_
    return np.where(keep, z, -np.inf)


def _top_p(z, p, rule, nucleus, inclusive, notes):
    """Keep the most probable prefix whose mass reaches ``p`` (ties at the boundary by ``rule``)."""
    if not p < 1.0:
        return z
    probs = _softmax(z)
    ranked = _order(probs, probs > 0, rule)
    mass = probs[ranked]
    before = np.concatenate([[0.0], np.cumsum(mass)[:-1]])  # the mass ranked strictly before each token
    # ``before`` increases: the kept prefix is its first m tokens
    m = int(np.count_nonzero(before < p if nucleus == "reaches" else before <= p))
    keep = np.zeros(z.size, dtype=bool)
    keep[ranked[:m]] = True
    if m < ranked.size:
        tied = ranked[m:][mass[m:] == mass[m - 1]]
        if tied.size and rule == "any":
            notes.append(f"top-p boundary tie (p = {p})")
        if tied.size and (rule == "keep" or (rule == "any" and inclusive)):
            keep[tied] = True
        if _near(before[m], p) or _near(before[m - 1], p):
            notes.append(f"top-p boundary within rounding (p = {p})")
            if inclusive:
                keep[ranked[m]] = True
    return np.where(keep, z, -np.inf)


def _min_p(z, m, inclusive, notes):
    if not m > 0:
        return z
    probs = _softmax(z)
    threshold = m * probs.max()
    keep = probs >= threshold
    near = (probs > 0) & ~keep & (threshold - probs <= BOUNDARY_TOLERANCE * threshold)
    near |= keep & (probs > threshold) & (probs - threshold <= BOUNDARY_TOLERANCE * threshold)
    if near.any():
        notes.append(f"min-p boundary within rounding (min_p = {m})")
        if inclusive:
            keep |= near
    return np.where(keep, z, -np.inf)


def _greedy(raw, rule):
    top = raw.max()
    maxima = np.flatnonzero(raw == top)
    near = np.flatnonzero((raw < top) & (top - raw <= BOUNDARY_TOLERANCE * max(1.0, abs(top))))
    law = np.zeros(raw.size)
    law[maxima[-1] if rule == "high_index" else maxima[0]] = 1.0
    support = law > 0
    notes = []
    if maxima.size > 1 and rule == "any":
        notes.append("greedy tie among the largest logits")
        support[maxima] = True
    if near.size:
        notes.append("greedy argmax within rounding")
        support[near] = True
        support[maxima] = True
    return law, support, notes


def _row(values, params: dict, processing: TokenProcessing):
    """``(law, support, notes)`` of one row (see the module docstring)."""
    if processing.inputs == "logits":
        raw = values
        if processing.greedy and params["temperature"] == 0:
            return _greedy(raw, processing.tie("greedy"))
    else:
        with np.errstate(divide="ignore"):
            raw = np.log(values)
    readings = []
    notes: list = []
    for inclusive in (False, True):
        z = raw.copy()
        seen = [] if inclusive else notes
        for step in processing.order:
            if step == "temperature":
                z = z / params["temperature"]
            elif step == "top_k":
                z = _top_k(z, int(params["top_k"]), processing.tie("top_k"), inclusive, seen)
            elif step == "top_p":
                z = _top_p(z, float(params["top_p"]), processing.tie("top_p"), processing.nucleus, inclusive, seen)
            else:
                z = _min_p(z, float(params["min_p"]), inclusive, seen)
        readings.append(z)
    law = _softmax(readings[0])
    support = (law > 0) | (_softmax(readings[1]) > 0)
    return law, support, notes


def _token_laws_iv(values, params, processing):
    if not isinstance(processing, TokenProcessing):
        raise TypeError(f"processing must be a TokenProcessing; got {type(processing).__name__}.")
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] < 1:
        raise ValueError(f"{processing.inputs} must be a [R, V] table with V >= 1; got shape {values.shape}.")
    rows = values.shape[0]
    if processing.inputs == "logits":
        bad = np.isnan(values) | (values == np.inf)
        if bad.any():
            r, v = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"logits[{r}, {v}] is {float(values[r, v])!r}; logits must be finite or -inf (masked).")
        if not np.isfinite(values).any(axis=1).all():
            raise ValueError(f"logits row {int(np.flatnonzero(~np.isfinite(values).any(axis=1))[0])} masks every token.")
    elif not (np.isfinite(values).all() and (values >= 0).all() and (values.sum(axis=1) > 0).all()):
        raise ValueError("probs must be finite, non-negative, with a positive sum in every row.")
    checked = {}
    limits = {"temperature": (np.float64, lambda a: (a >= 0).all(), ">= 0 (0 = greedy)"),
              "top_k": (np.int64, lambda a: (a >= 0).all(), ">= 0 (0 = off)"),
              "top_p": (np.float64, lambda a: ((a > 0) & (a <= 1)).all(), "in (0, 1] (1.0 = off)"),
              "min_p": (np.float64, lambda a: ((a >= 0) & (a <= 1)).all(), "in [0, 1] (0 = off)")}
    for step in processing.order:
        if params.get(step) is None:
            raise ValueError(f"the processing applies {step}: give {step} [R] (one value per row).")
        dtype, ok, allowed = limits[step]
        arr = np.asarray(params[step], dtype=dtype)
        if arr.shape != (rows,) or not ok(arr):
            raise ValueError(f"{step} must hold one value per row, shape ({rows},), each {allowed}; got {arr.tolist()}.")
        checked[step] = arr
    return values, checked


def token_laws(values, *, processing: TokenProcessing, temperature=None, top_k=None, top_p=None,
               min_p=None) -> TokenLaws:
    """The exact law of every row of ``values`` (logits or probabilities, [R, V]) under ``processing``, with
    one parameter per row for each step it applies (see the module docstring; computed in float64 from the
    values as given). Raises ``ValueError`` naming the first bad input."""
    values, params = _token_laws_iv(values, {"temperature": temperature, "top_k": top_k, "top_p": top_p,
                                             "min_p": min_p}, processing)
    laws, supports, ambiguous, reasons = [], [], [], []
    for r in range(values.shape[0]):
        law, support, notes = _row(values[r], {k: v[r] for k, v in params.items()}, processing)
        laws.append(law)
        supports.append(support)
        ambiguous.append(bool(notes))
        reasons.append("; ".join(notes))
    return TokenLaws(np.stack(laws), np.stack(supports), np.array(ambiguous, dtype=bool), tuple(reasons))
