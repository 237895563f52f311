"""Pooling of cells into bins on *expected* counts only (never on observed counts).

Outcomes are sorted by probability (descending, stable); outcomes whose expected
count ``n * p_i`` is at least ``E`` stay singletons, the rest are grouped
consecutively into bins of expected count about ``E`` (never below
``max(min_expected, E/2)``), ``E = max(min_expected, n / max_bins)``, raised
until at most ``max_bins`` bins are formed. Because the binning is a
function of ``(probs, n)`` only, the null law of the binned counts is exactly the
multinomial law of the bin probabilities.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_MAX_BINS = 512


@dataclass(frozen=True)
class Pooling:
    order: np.ndarray        # indices of positive-probability outcomes, sorted by prob desc
    bin_of_sorted: np.ndarray  # bin id for each entry of ``order``
    bin_probs: np.ndarray    # probability of each bin
    nbins: int

    def bin_counts(self, counts):
        return np.bincount(self.bin_of_sorted, weights=None if counts is None else counts[self.order],
                           minlength=self.nbins).astype(np.int64)


def sorted_order(probs):
    pos = np.flatnonzero(probs > 0)
    return pos[np.argsort(-probs[pos], kind="stable")]


def pool(probs, n, *, min_expected=5.0, max_bins=DEFAULT_MAX_BINS, order=None):
    """Pool outcomes of ``probs`` for a sample of size ``n`` (see module docstring)."""
    if order is None:
        order = sorted_order(probs)
    e_min = max(float(min_expected), n / max_bins) if n > 0 else float("inf")
    while True:
        pl = _pool(probs[order], order, n, e_min, max(float(min_expected), 0.5 * e_min))
        if pl.nbins <= max_bins:
            return pl
        e_min *= 1.25


def _pool(ps, order, n, e_min, e_merge):
    mu = n * ps
    nsingle = int(np.searchsorted(-mu, -e_min, side="right"))  # mu sorted desc: count mu >= e_min
    rest = mu[nsingle:]
    bin_ids = np.empty(len(ps), dtype=np.int64)
    bin_ids[:nsingle] = np.arange(nsingle)
    if len(rest):
        cum = np.cumsum(rest)
        raw = np.floor((cum - 0.5 * rest) / e_min).astype(np.int64)  # midpoint rule
        # groups with raw label; compute their sums, then merge greedily until each >= e_min
        starts = np.flatnonzero(np.r_[True, raw[1:] != raw[:-1]])
        sums = np.add.reduceat(rest, starts)
        label = np.empty(len(starts), dtype=np.int64)
        cur, acc = 0, 0.0
        for g in range(len(starts)):
            label[g] = cur
            acc += sums[g]
            if acc >= e_merge:
                cur += 1
                acc = 0.0
        ngroups = cur + (1 if acc > 0 else 0)
        if acc > 0 and cur > 0:  # leftover smaller than e_min: merge into previous group
            label[label == cur] = cur - 1
            ngroups = cur
        sizes = np.diff(np.r_[starts, len(rest)])
        grp = np.repeat(label, sizes)
        if ngroups == 1 and sums.sum() < e_merge and nsingle > 0:
            grp[:] = -1  # merge the whole tail into the last singleton
            bin_ids[nsingle:] = nsingle - 1
        else:
            bin_ids[nsingle:] = nsingle + grp
    nbins = int(bin_ids.max()) + 1 if len(bin_ids) else 0
    bin_probs = np.bincount(bin_ids, weights=ps, minlength=nbins)
    return Pooling(order=order, bin_of_sorted=bin_ids, bin_probs=bin_probs, nbins=nbins)


def pooled_nbins_uniform(k, n, *, min_expected=5.0, max_bins=DEFAULT_MAX_BINS):
    """Number of bins ``pool`` forms for the uniform law on ``k`` outcomes (closed form)."""
    if n <= 0:
        return 1
    e_min = max(float(min_expected), n / max_bins)
    mu = n / k
    if mu >= e_min:
        return k
    per = int(np.ceil(e_min / mu - 1e-12))
    return max(1, k // per)
