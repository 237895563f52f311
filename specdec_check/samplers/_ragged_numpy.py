"""The reference ragged verifier in numpy: the production calling convention (vLLM v1 style).

``verify(*, draft_token_ids [T], num_draft_tokens [B], draft_probs [T, V] | None,
target_logits [T + B, V], temperature [B], top_k [B], top_p [B], generator) -> int64 [B, max(n) + 1]``.
Random requests follow Leviathan et al. 2023, Algorithm 1 on their processed laws; greedy
requests (temperature 0) emit what greedy decoding would. The processing is written the way
vLLM writes it (ascending sort, mask where the ascending cumulative mass is at most ``1 - top_p``),
independently of :func:`specdec_check.exact.processed_target_probs`, which the checker uses.
"""

from __future__ import annotations

import numpy as np

from .._ragged_layout import ragged_layout
from ..exact._sampling_params import VLLM_V1_PROCESSING, SamplingProcessing

__all__ = ["check_ragged_args", "numpy_ragged_verifier", "numpy_ragged_verify"]


def check_ragged_args(draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k, top_p,
                      min_p=None):
    """The inputs as numpy arrays (int64 ids and counts, float64 rows and parameters) and their layout.

    Raises ``ValueError`` naming the first malformed input and what shape or range it must have.
    """
    n = np.asarray(num_draft_tokens)
    if n.ndim != 1 or n.dtype.kind not in "iu":
        raise ValueError(f"num_draft_tokens must be an int array [B]; got dtype {n.dtype}, shape {n.shape}.")
    layout = ragged_layout(n)
    batch, total = layout.batch, layout.num_drafts
    ids = np.asarray(draft_token_ids)
    if ids.shape != (total,) or (total and ids.dtype.kind not in "iu"):
        raise ValueError(f"draft_token_ids must be int [T] with T = sum(num_draft_tokens) = {total}; got dtype "
                         f"{ids.dtype}, shape {ids.shape}.")
    logits = np.asarray(target_logits)
    if logits.ndim != 2 or logits.shape[0] != total + batch or logits.dtype.kind != "f":
        raise ValueError(f"target_logits must be float [T + B, V] = [{total + batch}, V]: each request's drafts' rows "
                         f"then its bonus row; got dtype {logits.dtype}, shape {logits.shape}.")
    vocab = logits.shape[1]
    if np.isnan(logits).any() or (logits == np.inf).any():
        raise ValueError("target_logits holds NaN or +inf; logits must be finite or -inf (masked).")
    ids = ids.astype(np.int64, copy=False)
    if total and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(f"draft_token_ids must lie in [0, {vocab}); got ids from {ids.min()} to {ids.max()}.")
    if draft_probs is not None:
        draft_probs = np.asarray(draft_probs)
        if draft_probs.shape != (total, vocab) or draft_probs.dtype.kind != "f":
            raise ValueError(f"draft_probs must be float [T, V] = [{total}, {vocab}] or None (one-hot drafts); got "
                             f"dtype {draft_probs.dtype}, shape {draft_probs.shape}.")
        if not np.isfinite(draft_probs).all():
            raise ValueError("draft_probs holds a NaN or infinite probability.")
    params = []
    for name, values, kind in (("temperature", temperature, "f"), ("top_k", top_k, "iu"), ("top_p", top_p, "f"),
                               ("min_p", min_p, "f")):
        if values is None:
            params.append(None)
            continue
        arr = np.asarray(values)
        if arr.shape != (batch,) or arr.dtype.kind not in (kind if kind == "iu" else "fiu"):
            raise ValueError(f"{name} must be [B] = [{batch}] ({'int' if kind == 'iu' else 'float'}); got dtype "
                             f"{arr.dtype}, shape {arr.shape}.")
        params.append(arr)
    temperature, top_k, top_p, min_p = params
    if not np.isfinite(temperature).all() or (temperature < 0).any():
        raise ValueError(f"temperature must be finite and >= 0 (0 = greedy); got {temperature.tolist()}.")
    if (top_k < 0).any():
        raise ValueError(f"top_k must be >= 0 (0 = off); got {top_k.tolist()}.")
    if not ((top_p > 0) & (top_p <= 1)).all():
        raise ValueError(f"top_p must lie in (0, 1] (1.0 = off); got {top_p.tolist()}.")
    if min_p is not None and not ((min_p >= 0) & (min_p <= 1)).all():
        raise ValueError(f"min_p must lie in [0, 1] (0 = off); got {min_p.tolist()}.")
    return (ids, layout, draft_probs, logits.astype(np.float64, copy=False), temperature.astype(np.float64),
            top_k.astype(np.int64), top_p.astype(np.float64), None if min_p is None else min_p.astype(np.float64))


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _processed(logits, temperature, top_k, top_p, min_p, order):
    """Laws of random rows: each step of ``order`` on masked logits, then softmax (vLLM's formulation:
    top-k keeps the logits at least the k-th largest; top-p drops the least probable tokens while
    their ascending cumulative mass is at most ``1 - top_p``, always keeping the most probable)."""
    x = logits.copy()
    vocab = x.shape[1]
    for step in order:
        if step == "temperature":
            x /= temperature[:, None]
        elif step == "top_k":
            for r in np.flatnonzero((top_k > 0) & (top_k < vocab)):
                kth = np.partition(x[r], vocab - top_k[r])[vocab - top_k[r]]
                x[r, x[r] < kth] = -np.inf
        elif step == "top_p":
            on = np.flatnonzero(top_p < 1.0)
            if on.size:
                probs = _softmax(x[on])
                ascending = np.sort(probs, axis=1)
                dropped = np.count_nonzero(np.cumsum(ascending, axis=1) <= (1.0 - top_p[on])[:, None], axis=1)
                smallest_kept = ascending[np.arange(on.size), np.minimum(dropped, vocab - 1)]
                x[on] = np.where(probs < smallest_kept[:, None], -np.inf, x[on])
        elif step == "min_p" and min_p is not None:
            on = min_p > 0
            if on.any():
                probs = _softmax(x[on])
                x[on] = np.where(probs < min_p[on, None] * probs.max(axis=1, keepdims=True), -np.inf, x[on])
    return _softmax(x)


def _inverse_cdf(rows, uniforms):
    """One token per (unnormalised) row by inverse CDF; the last positive token when ``u * total`` rounds up."""
    cdf = np.cumsum(rows, axis=1)
    token = np.count_nonzero(cdf <= (uniforms * cdf[:, -1])[:, None], axis=1)
    over = token >= rows.shape[1]
    if over.any():
        positive = rows[over] > 0
        if not positive.any(axis=1).all():
            raise ValueError("a law to sample from has no mass.")
        token[over] = rows.shape[1] - 1 - positive[:, ::-1].argmax(axis=1)
    return token


def _verify(ids, layout, draft_probs, logits, temperature, top_k, top_p, min_p, generator, order):
    batch, width, vocab = layout.batch, layout.width, logits.shape[1]
    uniforms = generator.random(layout.num_drafts + batch)
    greedy = temperature == 0
    row_greedy = greedy[layout.row_request]
    random_rows = np.flatnonzero(~row_greedy)
    probs = np.zeros_like(logits)  # laws of random requests' rows (greedy rows unused)
    if random_rows.size:
        req = layout.row_request[random_rows]
        probs[random_rows] = _processed(logits[random_rows], temperature[req], top_k[req], top_p[req],
                                        None if min_p is None else min_p[req], order)
    argmax = logits.argmax(axis=1)
    # acceptance of each flat draft: greedy requests while the draft is the argmax; random ones iff u q < p
    rows = layout.draft_row
    draft_greedy = greedy[layout.draft_request]
    p_x = probs[rows, ids]
    q_x = np.ones(ids.shape[0]) if draft_probs is None else draft_probs[np.arange(ids.shape[0]), ids]
    accepted = np.where(draft_greedy, ids == argmax[rows], uniforms[: ids.shape[0]] * q_x < p_x)
    rejected = np.ones((batch, width), dtype=bool)  # sentinel True at column n_i and beyond
    rejected[layout.draft_request, layout.draft_position] = ~accepted
    stop = rejected.argmax(axis=1)
    final_row = layout.row_start + stop
    token = argmax[final_row]
    rand = np.flatnonzero(~greedy)
    if rand.size:
        law = probs[final_row[rand]].copy()
        recover = stop[rand] < layout.num_draft_tokens[rand]
        if recover.any():
            flat = layout.draft_start[rand[recover]] + stop[rand[recover]]
            if draft_probs is None:
                law[np.flatnonzero(recover), ids[flat]] = 0.0  # one-hot draft: max(0, p - 1) = 0 at the draft
            else:
                law[recover] = np.maximum(law[recover] - draft_probs[flat], 0.0)
        token[rand] = _inverse_cdf(law, uniforms[layout.num_drafts + rand])
    out = np.full((batch, width), -1, dtype=np.int64)
    if width > 1:
        drafts = layout.padded(ids, -1)
        out[:, : width - 1] = np.where(np.arange(width - 1) < stop[:, None], drafts, -1)
    out[np.arange(batch), stop] = token
    return out


def numpy_ragged_verifier(processing: SamplingProcessing = VLLM_V1_PROCESSING):
    """The reference ragged verifier for ``processing`` (default vLLM v1's order); with a processing
    that applies min-p, the verifier takes a ``min_p`` [B] keyword as well (0 = off)."""
    if not isinstance(processing, SamplingProcessing):
        raise TypeError(f"processing must be a SamplingProcessing; got {type(processing).__name__}.")
    order = processing.order

    def run(generator, *args):
        if not isinstance(generator, np.random.Generator):
            raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
        return _verify(*check_ragged_args(*args), generator, order)

    if processing.uses_min_p:
        def numpy_ragged_verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                                top_p, min_p, generator):
            return run(generator, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                       top_p, min_p)
    else:
        def numpy_ragged_verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                                top_p, generator):
            return run(generator, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                       top_p)
    numpy_ragged_verify.__doc__ = _DOC.format(order=processing.describe())
    numpy_ragged_verify.processing = processing
    return numpy_ragged_verify


_DOC = """One ragged speculative step, exact (Leviathan et al. 2023, Algorithm 1 per random request).

Random requests: each row's law is its logits processed as {order}; draft ``x`` at flat
position ``t`` is accepted iff ``u_t q(x) < p(x)`` (``q(x) = 1`` when ``draft_probs`` is None:
one-hot drafts); at the first rejection one token is drawn from ``norm(max(0, p - q))``, after
full acceptance from the bonus row. Greedy requests (temperature 0): drafts while they equal the
argmax of their rows' logits, then the argmax. Uniforms: ``generator.random(T + B)``.
Returns int64 [B, max(num_draft_tokens) + 1], -1 padded; raises ``ValueError`` on malformed or
non-finite input (NaN or +inf logits).
"""

numpy_ragged_verify = numpy_ragged_verifier()
numpy_ragged_verify.__qualname__ = numpy_ragged_verify.__name__ = "numpy_ragged_verify"
