"""The target law of a request from its logits and sampling parameters (the production convention).

A random request (temperature > 0) samples from its logits processed in a declared order; the
default is vLLM v1's ``RejectionSampler`` (``apply_sampling_constraints`` then softmax,
``vllm/v1/sample/rejection_sampler.py`` at commit 7f6fc1c5ce8d): divide by the temperature,
keep the ``top_k`` largest logits, keep the smallest most-probable set whose mass reaches
``top_p`` (computed on the law left by top-k, renormalised), softmax. ``min_p`` (keep tokens whose
probability is at least ``min_p`` times the largest) is applied where a declared order puts it.
A greedy request (temperature 0) emits the argmax of its raw logits (the law is one-hot there).

Boundary conventions are fixed here as follows (implementations differ only on ties and on a
boundary hit exactly, which the checker's draws keep away from; see :func:`process_logits`'s
``margins``): top-k keeps every logit at least the k-th largest (ties kept, vLLM's
``apply_top_k_top_p_pytorch``); top-p keeps a token iff the mass of the tokens strictly more
probable than it is below ``top_p`` (so the token that crosses ``top_p`` is kept); min-p keeps
``p(x) >= min_p * max p``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._ragged_layout import ragged_layout

__all__ = ["PROCESSING_STEPS", "SamplingProcessing", "VLLM_V1_PROCESSING", "greedy_outputs", "process_logits",
           "processed_target_probs"]

#: The steps a processing order is made of ("temperature", "top_k" and "top_p" are always present).
PROCESSING_STEPS = ("temperature", "top_k", "top_p", "min_p")
#: Vocabularies up to this size are filtered with one sort of all rows at once; larger ones row by
#: row with ``np.partition`` (a sort of [N, 152064] rows costs ~10x a partition of each row).
SORT_VOCAB = 4096
#: Top-p on a large vocabulary first looks for its boundary among this many most probable tokens
#: (one partition and a small sort); only a row whose top tokens hold less than ``top_p`` is sorted whole.
TOP_P_CANDIDATES = 512


@dataclass(frozen=True)
class SamplingProcessing:
    """The order in which a framework turns a random request's logits into its law.

    ``order`` lists :data:`PROCESSING_STEPS`: "temperature", "top_k" and "top_p" exactly once each,
    "min_p" at most once (then the sampler takes a ``min_p`` [B] keyword, 0 = off). The law is the
    softmax of the logits after every step; each filter sees the law the previous steps left
    (renormalised). Default: vLLM v1's ``("temperature", "top_k", "top_p")``.
    """

    order: tuple = ("temperature", "top_k", "top_p")

    def __post_init__(self):
        order = tuple(self.order) if not isinstance(self.order, str) else (self.order,)
        unknown = [s for s in order if s not in PROCESSING_STEPS]
        if unknown:
            raise ValueError(f"unknown processing step(s) {unknown}; choose from {PROCESSING_STEPS}.")
        if len(set(order)) != len(order):
            raise ValueError(f"processing order {order} repeats a step; list each step once.")
        missing = [s for s in ("temperature", "top_k", "top_p") if s not in order]
        if missing:
            raise ValueError(f"processing order {order} lacks {missing}: temperature, top_k and top_p are always "
                             "applied (place them where the framework applies them).")
        object.__setattr__(self, "order", order)

    @property
    def uses_min_p(self) -> bool:
        """Whether requests carry a ``min_p`` (and the sampler takes the ``min_p`` keyword)."""
        return "min_p" in self.order

    def describe(self) -> str:
        return " -> ".join(self.order) + " -> softmax"


#: vLLM v1 ``RejectionSampler.forward``: ``apply_sampling_constraints`` (temperature, then
#: ``apply_top_k_top_p``) then softmax; min-p is not applied to the target rows there.
VLLM_V1_PROCESSING = SamplingProcessing()


def _softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax of logits that may hold -inf (masked tokens get probability 0)."""
    top = x.max(axis=1, keepdims=True)
    e = np.exp(x - top)
    return e / e.sum(axis=1, keepdims=True)


def _top_k(x, k, rows, margins):
    """Mask to -inf every logit below the k-th largest of its row (rows ``rows``, k per row)."""
    vocab = x.shape[1]
    if vocab <= SORT_VOCAB:
        sub = np.sort(x[rows], axis=1)
        kth = sub[np.arange(rows.size), vocab - k]
        below = np.where(k < vocab, sub[np.arange(rows.size), np.maximum(vocab - k - 1, 0)], -np.inf)
    else:
        kth, below = np.empty(rows.size), np.empty(rows.size)
        for i, (r, kk) in enumerate(zip(rows, k)):
            part = np.partition(x[r], (vocab - kk - 1, vocab - kk))
            kth[i], below[i] = part[vocab - kk], part[vocab - kk - 1]
    x[rows] = np.where(x[rows] >= kth[:, None], x[rows], -np.inf)
    if margins is not None:
        with np.errstate(invalid="ignore"):  # -inf - -inf: fewer than k tokens are left, no boundary
            gap = kth - below
        margins["top_k_gap"][rows] = np.where(np.isfinite(kth) & np.isfinite(gap), gap, np.inf)


def _top_p_row_threshold(probs_row, p):
    """``(threshold, lower, upper)`` of one row: keep ``probs >= threshold``; the boundary masses
    ``p - C_{m-1}`` and ``C_m - p`` around the kept count ``m`` (C: descending cumulative mass)."""
    vocab = probs_row.shape[0]
    m0 = min(vocab, TOP_P_CANDIDATES)
    top = -np.sort(-np.partition(probs_row, vocab - m0)[vocab - m0:])
    cum = np.cumsum(top)
    if m0 < vocab and not cum[m0 - 2] >= p:  # the boundary lies beyond the candidates: sort the row
        top = -np.sort(-probs_row)
        cum = np.cumsum(top)
    m = 1 + int(np.count_nonzero(cum[:-1] < p))
    lower = p - (cum[m - 2] if m >= 2 else 0.0)
    upper = cum[m - 1] - p if m < top.shape[0] else np.inf
    return top[m - 1], lower, upper


def _top_p(x, p, rows, margins):
    """Keep the smallest most-probable set of each row whose mass reaches ``p`` (rows ``rows``)."""
    vocab = x.shape[1]
    probs = _softmax(x[rows])
    if vocab <= SORT_VOCAB:
        top = -np.sort(-probs, axis=1)
        cum = np.cumsum(top, axis=1)
        m = 1 + np.count_nonzero(cum[:, :-1] < p[:, None], axis=1)
        at = np.arange(rows.size)
        threshold = top[at, m - 1]
        lower = p - np.where(m >= 2, cum[at, np.maximum(m - 2, 0)], 0.0)
        upper = np.where(m < vocab, cum[at, np.minimum(m - 1, vocab - 1)] - p, np.inf)
    else:
        threshold, lower, upper = np.empty(rows.size), np.empty(rows.size), np.empty(rows.size)
        for i in range(rows.size):
            threshold[i], lower[i], upper[i] = _top_p_row_threshold(probs[i], p[i])
    keep = (probs >= threshold[:, None]) & (probs > 0)
    x[rows] = np.where(keep, x[rows], -np.inf)
    if margins is not None:
        margins["top_p_margin"][rows] = np.minimum(lower, upper)


def _min_p(x, min_p, rows, margins):
    """Keep the tokens whose probability is at least ``min_p`` times the row's largest."""
    probs = _softmax(x[rows])
    ratio = probs / probs.max(axis=1, keepdims=True)
    keep = ratio >= min_p[:, None]
    x[rows] = np.where(keep, x[rows], -np.inf)
    if margins is not None:
        distance = np.where(probs > 0, np.abs(ratio - min_p[:, None]), np.inf)
        margins["min_p_margin"][rows] = distance.min(axis=1)


def process_logits(logits, temperature, top_k, top_p, min_p=None, *, order=VLLM_V1_PROCESSING.order,
                   margins: bool = False):
    """Unvalidated kernel of :func:`processed_target_probs` on per-row parameters.

    ``logits`` float [N, V]; ``temperature``, ``top_k``, ``top_p`` (and ``min_p``) [N], one value per
    row. Returns the float64 laws [N, V] (greedy rows: one-hot at the argmax); with ``margins``,
    ``(laws, margins)`` where ``margins`` maps "greedy_gap" (largest minus second-largest raw logit
    of greedy rows), "top_k_gap" (k-th minus (k+1)-th largest processed logit), "top_p_margin"
    (``min(p - C_{m-1}, C_m - p)`` around the kept count ``m``) and "min_p_margin" (smallest
    ``|p(x)/max p - min_p|``) to [N] arrays, ``inf`` where a boundary does not apply. A boundary
    with a positive margin is one on which every tie and inclusion convention agrees.
    """
    x = np.array(logits, dtype=np.float64, copy=True)
    n, vocab = x.shape
    temperature = np.asarray(temperature, dtype=np.float64)
    top_k = np.asarray(top_k, dtype=np.int64)
    top_p = np.asarray(top_p, dtype=np.float64)
    greedy = temperature == 0
    out_margins = {name: np.full(n, np.inf) for name in ("greedy_gap", "top_k_gap", "top_p_margin", "min_p_margin")} \
        if margins else None
    for step in order:
        if step == "temperature":
            x /= np.where(greedy, 1.0, temperature)[:, None]
        elif step == "top_k":
            rows = np.flatnonzero(~greedy & (top_k > 0) & (top_k < vocab))
            if rows.size:
                _top_k(x, top_k[rows], rows, out_margins)
        elif step == "top_p":
            rows = np.flatnonzero(~greedy & (top_p < 1.0))
            if rows.size:
                _top_p(x, top_p[rows], rows, out_margins)
        elif step == "min_p" and min_p is not None:
            min_p = np.asarray(min_p, dtype=np.float64)
            rows = np.flatnonzero(~greedy & (min_p > 0.0))
            if rows.size:
                _min_p(x, min_p[rows], rows, out_margins)
    laws = _softmax(x)
    if greedy.any():
        g = np.flatnonzero(greedy)
        raw = np.asarray(logits, dtype=np.float64)[g]
        laws[g] = 0.0
        laws[g, raw.argmax(axis=1)] = 1.0
        if margins and vocab > 1:
            two = np.partition(raw, vocab - 2, axis=1)
            out_margins["greedy_gap"][g] = two[:, vocab - 1] - two[:, vocab - 2]
    return (laws, out_margins) if margins else laws


def _per_request(name, values, batch, dtype):
    arr = np.asarray(values, dtype=dtype)
    if arr.shape != (batch,):
        raise ValueError(f"{name} must have one value per request, shape ({batch},); got shape {arr.shape}.")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} holds a non-finite value: {arr.tolist()}.")
    return arr


def processed_target_probs(target_logits, num_draft_tokens, temperature, top_k, top_p, min_p=None, *,
                           processing: SamplingProcessing = VLLM_V1_PROCESSING) -> np.ndarray:
    """The exact law of every target row of a ragged batch, float64 [T + B, V].

    Row ``r`` belongs to request ``i`` (``num_draft_tokens[i] + 1`` contiguous rows per request,
    see :mod:`specdec_check._ragged_layout`); a random request's rows are its logits processed by
    ``processing`` (default vLLM v1: ``/ temperature``, top-k, top-p, softmax); a greedy request's
    rows (``temperature == 0``) are one-hot at the argmax. ``top_k`` 0 and ``top_p`` 1.0 (and
    ``min_p`` 0) are off. Raises ``ValueError`` naming the first bad input (a NaN or +inf logit,
    a row with no finite logit, a negative temperature, top_p outside (0, 1], ...).
    """
    logits = np.asarray(target_logits, dtype=np.float64)
    layout = ragged_layout(num_draft_tokens)
    batch = layout.batch
    if logits.ndim != 2 or logits.shape[0] != layout.num_rows:
        raise ValueError(f"target_logits must be [T + B, V] = [{layout.num_rows}, V] for num_draft_tokens "
                         f"{layout.num_draft_tokens.tolist()}; got shape {logits.shape}.")
    bad = np.isnan(logits) | (logits == np.inf)
    if bad.any():
        r, v = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"target_logits[{r}, {v}] is {logits[r, v]!r}; logits must be finite or -inf (masked).")
    if not np.isfinite(logits).any(axis=1).all():
        r = int(np.flatnonzero(~np.isfinite(logits).any(axis=1))[0])
        raise ValueError(f"target_logits row {r} has no finite logit: every token is masked.")
    temperature = _per_request("temperature", temperature, batch, np.float64)
    top_k = _per_request("top_k", top_k, batch, np.int64)
    top_p = _per_request("top_p", top_p, batch, np.float64)
    if (temperature < 0).any():
        raise ValueError(f"temperature must be >= 0 (0 = greedy); got {temperature.tolist()}.")
    if (top_k < 0).any():
        raise ValueError(f"top_k must be >= 0 (0 = off); got {top_k.tolist()}.")
    if ((top_p <= 0) | (top_p > 1)).any():
        raise ValueError(f"top_p must lie in (0, 1] (1.0 = off); got {top_p.tolist()}.")
    rows_min_p = None
    if processing.uses_min_p:
        if min_p is None:
            raise ValueError(f"the processing {processing.describe()} applies min_p: pass min_p [B] (0 = off).")
        min_p = _per_request("min_p", min_p, batch, np.float64)
        if ((min_p < 0) | (min_p > 1)).any():
            raise ValueError(f"min_p must lie in [0, 1] (0 = off); got {min_p.tolist()}.")
        rows_min_p = min_p[layout.row_request]
    elif min_p is not None:
        raise ValueError(f"min_p was given but the processing {processing.describe()} does not apply it; declare "
                         "SamplingProcessing(order=(..., 'min_p')).")
    req = layout.row_request
    return process_logits(logits, temperature[req], top_k[req], top_p[req], rows_min_p, order=processing.order)


def greedy_outputs(draft_token_ids, num_draft_tokens, target_logits) -> np.ndarray:
    """What greedy decoding emits for every request, int64 [B, max(n) + 1], -1 padded.

    With ``a_j`` the argmax of request ``i``'s target row ``j``: its drafts while they equal
    ``a_j``, then ``a_j`` at the first draft that differs (or the bonus row's argmax when every
    draft matches). Ties go to the lowest token id (``argmax``); the checker's draws have none.
    """
    layout = ragged_layout(num_draft_tokens)
    ids = np.asarray(draft_token_ids, dtype=np.int64).reshape(-1)
    argmax = np.asarray(target_logits).argmax(axis=1)
    batch, width = layout.batch, layout.width
    out = np.full((batch, width), -1, dtype=np.int64)
    match = ids == argmax[layout.draft_row]
    # first mismatch per request (n_i when every draft matches): a sentinel column of mismatches
    mismatch = np.ones((batch, width), dtype=bool)
    mismatch[layout.draft_request, layout.draft_position] = ~match
    stop = mismatch.argmax(axis=1)
    stop = np.minimum(stop, layout.num_draft_tokens)
    keep = np.arange(width)[None, :] < stop[:, None]
    if width > 1:
        drafts = layout.padded(ids, -1)
        out[:, : width - 1] = np.where(keep[:, : width - 1], drafts, -1)
    out[np.arange(batch), stop] = argmax[layout.row_start + stop]
    return out
