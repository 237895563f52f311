"""Categorical sampling from probability rows and from tables of cumulative rows.

Shared by the reference samplers, the scenarios (drafting from law tables) and the checker
(exact laws kept as exclusive cumulative rows, so a randomized PIT costs two gathers).
"""

from __future__ import annotations

import numpy as np

__all__ = ["categorical", "categorical_from_table", "exclusive_cumsum", "last_positive", "search_table",
           "search_table_of"]


def categorical(probs: np.ndarray, generator: np.random.Generator, *, cdf: np.ndarray | None = None) -> np.ndarray:
    """Draw one token per row of ``probs`` [N, V] by inverse CDF (never a zero-mass token).

    ``cdf``, when given, must be ``np.cumsum(probs, axis=1)`` (for example gathered from a
    model's cumulative table); the draw is then the same without the cumulative sum.
    """
    if cdf is None:
        cdf = np.cumsum(probs, axis=1)
    token = (cdf <= (generator.random(cdf.shape[0]) * cdf[:, -1])[:, None]).sum(axis=1)
    over = token >= cdf.shape[1]
    if over.any():
        token[over] = last_positive(probs[over])
    return token


def last_positive(rows: np.ndarray) -> np.ndarray:
    """Index of the last positive entry of each row: where inverse CDF lands when ``u * total``
    rounds up to the total."""
    return rows.shape[1] - 1 - (rows[:, ::-1] > 0).argmax(axis=1)


def exclusive_cumsum(rows: np.ndarray) -> np.ndarray:
    """``below[..., y] = sum_{t<y} rows[..., t]`` with the row total in the last of ``V + 1`` columns,
    so that ``F(y-1)`` and ``F(V-1)`` of a sample are single gathers."""
    below = np.empty(rows.shape[:-1] + (rows.shape[-1] + 1,))
    below[..., 0] = 0.0
    np.cumsum(rows, axis=-1, out=below[..., 1:])
    return below


def search_table(below: np.ndarray) -> np.ndarray:
    """The search form of exclusive cumulative rows ``below`` [K, V+1] (``below[:, 0] = 0``, the
    total last) for :func:`categorical_from_table`: padded with +inf to a power-of-two width."""
    rows, width = below.shape
    padded = np.full((rows, 1 << int(np.ceil(np.log2(width)))), np.inf)
    padded[:, :width] = below
    return padded


def search_table_of(rows: np.ndarray) -> np.ndarray:
    """``search_table(exclusive_cumsum(rows))`` for rows [K, V], the cumulative sums written straight into the
    padded table (the same floats, without the [K, V + 1] intermediate: 15.6 MB at V = 32,000, K = 61)."""
    count, vocab = rows.shape
    padded = np.full((count, 1 << int(np.ceil(np.log2(vocab + 1)))), np.inf)
    padded[:, 0] = 0.0
    np.cumsum(rows, axis=1, out=padded[:, 1:vocab + 1])
    return padded


def categorical_from_table(table: np.ndarray, row_index: np.ndarray, generator: np.random.Generator, *,
                           probs_rows: np.ndarray) -> np.ndarray:
    """:func:`categorical` of the rows ``probs_rows[row_index]`` [K, V] without gathering them.

    ``table`` is :func:`search_table` of their exclusive cumulative rows. The same uniforms give
    the same tokens as :func:`categorical` on the gathered rows: the token is the number of
    inclusive cumulative sums ``<= u * total``, found by a branchless binary search (log2(V + 1)
    gathers per row; Knuth, TAOCP vol. 3, section 6.2.1) instead of a pass over all V entries.
    """
    vocab = probs_rows.shape[1]
    width = table.shape[1]
    flat = table.reshape(-1)
    offset = row_index * width
    x = generator.random(row_index.shape[0]) * flat[offset + vocab]
    token = np.zeros(row_index.shape[0], dtype=np.int64)
    step = width // 2
    while step:  # invariant: below[token] <= x (below[0] = 0), and the answer is below token + 2 * step
        token += step * (flat[offset + token + step] <= x)
        step //= 2
    over = token >= vocab
    if over.any():
        token[over] = last_positive(probs_rows[row_index[over]])
    return token
