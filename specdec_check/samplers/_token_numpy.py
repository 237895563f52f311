"""The reference token sampler (numpy): temperature, top-k, top-p and min-p in that order, then one inverse-CDF
draw per output, rows reused through ``indices``.

Written from the definitions (Fan et al. 2018, top-k; Holtzman et al. 2020, top-p; Nguyen et al. 2024, min-p)
on a descending sort of each distinct row, independently of the checker's oracle
(:mod:`specdec_check.exact._token_law`). Ties at a boundary are kept (every token tied with the k-th largest
logit, every token as probable as the one whose mass reaches top_p), as ``transformers`` and vLLM do; greedy
rows (temperature 0) emit the lowest-index argmax of their raw logits.
"""

from __future__ import annotations

import numpy as np

from ..exact._token_law import TokenProcessing

__all__ = ["NUMPY_TOKEN_PROCESSING", "numpy_sample", "processed_probs"]

#: What :func:`numpy_sample` takes and does (``check_token_sampler`` reads it from the function's ``processing``).
NUMPY_TOKEN_PROCESSING = TokenProcessing(order=("temperature", "top_k", "top_p", "min_p"), ties="keep", indices=True)


def processed_probs(logits, temperature, top_k, top_p, min_p) -> np.ndarray:
    """float64 [U, V]: each row's law after temperature, top-k, top-p and min-p (ties kept; see the module
    docstring); greedy rows one-hot at the lowest-index argmax. One value of each parameter per row."""
    x = np.array(logits, dtype=np.float64)
    rows, vocab = x.shape
    out = np.zeros_like(x)
    for r in range(rows):
        z = x[r]
        if temperature[r] == 0:
            out[r, int(np.argmax(z))] = 1.0
            continue
        z = z / temperature[r]
        k = int(top_k[r])
        if 0 < k < vocab:
            kth = np.sort(z)[vocab - k]
            z = np.where(z >= kth, z, -np.inf)
        p = np.exp(z - z.max())
        p /= p.sum()
        if top_p[r] < 1.0:
            desc = np.sort(p)[::-1]
            before = np.cumsum(desc) - desc  # mass strictly more probable than each sorted token
            last = desc[np.count_nonzero(before < top_p[r]) - 1]  # the token whose mass reaches top_p
            p = np.where(p >= last, p, 0.0)
            p /= p.sum()
        if min_p[r] > 0:
            p = np.where(p >= min_p[r] * p.max(), p, 0.0)
            p /= p.sum()
        out[r] = p
    return out


def _distinct(indices, columns):
    """``(row of each distinct (row, parameters), its parameters [U, k], index of each output among them)``: one
    pass when every output of a row has the same parameters (the common case), else a sort of the outputs."""
    present = np.flatnonzero(np.bincount(indices))
    slot = np.zeros(present[-1] + 1, dtype=np.int64)
    slot[present] = np.arange(present.size)
    which = slot[indices]  # each output's row among the rows present, in index order
    first = np.zeros(present.size, dtype=np.int64)
    first[which[::-1]] = np.arange(indices.size)[::-1]  # an output of each row
    if all(np.array_equal(column, column[first][which]) for column in columns):
        return present, np.stack([column[first] for column in columns], axis=1), which
    distinct, which = np.unique(np.stack([indices, *columns], axis=1), axis=0, return_inverse=True)
    return distinct[:, 0].astype(np.int64), distinct[:, 1:], which.reshape(-1)


def numpy_sample(*, logits, temperature, top_k, top_p, min_p, indices, generator):
    """Sample one token per output: output ``i`` from row ``indices[i]`` of ``logits`` [U, V] with its own
    ``temperature[i]`` (0 = greedy), ``top_k[i]`` (0 = off), ``top_p[i]`` (1.0 = off) and ``min_p[i]`` (0 =
    off). Returns int64 [B]. The laws are built once per distinct (row, parameters); the draws are one
    uniform per output, inverted through the law's cumulative sum."""
    indices = np.asarray(indices, dtype=np.int64)
    columns = [np.asarray(x, dtype=np.float64) for x in (temperature, top_k, top_p, min_p)]
    rows, params, which = _distinct(indices, columns)
    laws = processed_probs(np.asarray(logits)[rows], params[:, 0], params[:, 1].astype(np.int64), params[:, 2],
                           params[:, 3])
    cdf = np.cumsum(laws, axis=1)
    cdf /= cdf[:, -1:]
    vocab = laws.shape[1]
    # One search over the rows laid end to end: row j's cumulative law lives in [j, j + 1].
    flat = (cdf + np.arange(cdf.shape[0])[:, None]).reshape(-1)
    u = generator.random(indices.shape[0])
    position = np.searchsorted(flat, which + u, side="right")
    return np.minimum(position - which * vocab, vocab - 1).astype(np.int64)


numpy_sample.processing = NUMPY_TOKEN_PROCESSING
