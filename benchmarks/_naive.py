"""Baselines for the throughput table: a naive per-row Python verifier and plain categorical sampling.

Neither is part of the package; both exist only so ``benchmarks/run.py`` can put numpy_verify
next to the two ends of the practical range in the same run.
"""

from __future__ import annotations

import numpy as np

__all__ = ["inverse_cdf_all_rows", "naive_verify"]


def inverse_cdf_all_rows(target_probs, generator):
    """One token from every one of the B x (gamma+1) target rows by inverse CDF (vectorized).

    The practical floor for numpy_verify: it reads every row once and draws one token per row,
    which is the least any exact verifier over the same inputs can do with numpy alone.
    Same code as ``benchmarks/bench_verify.py``.
    """
    rows = target_probs.reshape(-1, target_probs.shape[-1])
    cdf = np.cumsum(rows, axis=1)
    return (cdf <= generator.random((rows.shape[0], 1)) * cdf[:, -1:]).sum(axis=1)


def _draw(row, u):
    cdf = np.cumsum(row)
    token = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    if token >= row.size:  # u * total rounded up to total
        token = int(np.flatnonzero(row > 0)[-1])
    return token


def naive_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Leviathan et al. 2023 Algorithm 1, one row and one position at a time in Python.

    The loop a first implementation usually has: exact, same law as numpy_verify, no batching.
    """
    ids = np.asarray(draft_token_ids)
    batch, gamma = ids.shape
    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    for b in range(batch):
        for i in range(gamma):
            x = int(ids[b, i])
            p, q = target_probs[b, i, x], draft_probs[b, i, x]
            if generator.random() * q < p:
                out[b, i] = x
                continue
            residual = np.maximum(target_probs[b, i] - draft_probs[b, i], 0.0)
            out[b, i] = _draw(residual, generator.random())
            break
        else:
            out[b, gamma] = _draw(target_probs[b, gamma], generator.random())
    return out
