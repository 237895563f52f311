"""Pooling of cells into bins on *expected* counts only (never on observed counts).

Outcomes are sorted by probability (descending, stable); outcomes whose expected
count ``n * p_i`` is at least ``E = min_expected`` stay singletons; the rest (the
light tail) are grouped consecutively into bins of expected count about ``E``
(midpoint rule on the cumulative expected count; a group below ``E / 2`` joins the
previous tail group), so every tail bin expects at least ``E / 2`` unless the whole
tail does.  A tail bin is never merged into a singleton: deviations that cancel
inside a bin are invisible, and merging a heavy cell with light ones would hide
up to the heavy cell's mass (see :func:`hidden_mass`).  There is no cap on the number of bins
unless ``max_bins`` is given (then ``E`` is raised until at most ``max_bins``
bins form; only for callers that accept the hidden mass this costs).

Because the binning is a function of ``(probs, n)`` only, the null law of the
binned counts is exactly the multinomial law of the bin probabilities.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_MAX_BINS = None      # no cap: every bin cap hides deviations that cancel inside bins
DEFAULT_MIN_EXPECTED = 1.0   # singletons from one expected count: exact calibration needs no more,
                             # and each pooled cell can hide its deviation (measured in benchmarks/bench_power.py)


@dataclass(frozen=True)
class Pooling:
    order: np.ndarray          # indices of positive-probability outcomes, sorted by prob desc
    bin_of_sorted: np.ndarray  # bin id for each entry of ``order`` (nondecreasing)
    bin_probs: np.ndarray      # probability of each bin
    nbins: int
    hidden_mass: float = 0.0   # see hidden_mass()

    def bin_counts(self, counts):
        return np.bincount(self.bin_of_sorted, weights=None if counts is None else counts[self.order],
                           minlength=self.nbins).astype(np.int64)

    def bin_starts(self):
        """Start of each bin in ``order`` (bins are consecutive runs of the sorted order)."""
        return np.flatnonzero(np.r_[True, np.diff(self.bin_of_sorted) != 0])


def sorted_order(probs):
    pos = np.flatnonzero(probs > 0)
    return pos[np.argsort(-probs[pos], kind="stable")]


def pool(probs, n, *, min_expected=DEFAULT_MIN_EXPECTED, max_bins=DEFAULT_MAX_BINS, order=None):
    """Pool outcomes of ``probs`` for a sample of size ``n`` (see module docstring)."""
    if order is None:
        order = sorted_order(probs)
    ps = probs[order]
    e_min = float(min_expected)
    if n <= 0:
        return _finish(ps, order, np.zeros(len(ps), dtype=np.int64))
    while True:
        pl = _finish(ps, order, _bin_ids(ps * float(n), e_min))
        if max_bins is None or pl.nbins <= max_bins:
            return pl
        e_min *= 1.25


def _bin_ids(mu, e_min):
    """Bin id per sorted cell: singletons for ``mu >= e_min``, tail grouped (vectorised)."""
    nsingle = int(np.searchsorted(-mu, -e_min, side="right"))  # mu sorted desc: count mu >= e_min
    ids = np.empty(len(mu), dtype=np.int64)
    ids[:nsingle] = np.arange(nsingle)
    rest = mu[nsingle:]
    if len(rest) == 0:
        return ids
    cum = np.cumsum(rest)
    raw = np.floor((cum - 0.5 * rest) / e_min).astype(np.int64)  # midpoint rule
    starts = np.flatnonzero(np.r_[True, raw[1:] != raw[:-1]])
    sums = np.add.reduceat(rest, starts)
    anchor = sums >= 0.5 * e_min
    if not anchor.any():
        anchor[0] = True            # the whole tail is one (small) bin
    elif not anchor[0]:
        anchor[int(np.argmax(anchor))] = False
        anchor[0] = True            # small leading groups join the first large one
    label = np.cumsum(anchor) - 1   # small groups join the previous tail group
    sizes = np.diff(np.r_[starts, len(rest)])
    ids[nsingle:] = nsingle + np.repeat(label, sizes)
    return ids


def _finish(ps, order, ids):
    nbins = int(ids[-1]) + 1 if len(ids) else 0
    bin_probs = np.bincount(ids, weights=ps, minlength=nbins)
    return Pooling(order=order, bin_of_sorted=ids, bin_probs=bin_probs, nbins=nbins,
                   hidden_mass=_hidden(ps, ids, nbins, bin_probs))


def _hidden(ps, ids, nbins, bin_probs):
    """``sum_b (P_b - min_{i in b} p_i)`` over bins of two or more cells.

    Any law ``q`` satisfies ``TV(q, p) <= TV_bins(Q, P) + hidden`` (per bin,
    ``sum_i |q_i - p_i| = |Q_b - P_b| + 2 min(sum (q-p)^+, sum (q-p)^-)`` and the
    decrease is at most ``P_b`` minus one increasing cell), so a test of the bins
    sees at least ``TV - hidden`` of every deviation: the price of pooling.
    """
    if nbins == 0:
        return 0.0
    size = np.bincount(ids, minlength=nbins)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])  # bins are consecutive runs
    pmin = np.minimum.reduceat(ps, starts)
    multi = size >= 2
    return float(np.sum(bin_probs[multi] - pmin[multi]))


def hidden_mass(probs, n, *, min_expected=DEFAULT_MIN_EXPECTED, max_bins=DEFAULT_MAX_BINS, order=None):
    """TV that the pooling of ``probs`` at ``n`` can hide inside bins (see :func:`_hidden`)."""
    return pool(probs, n, min_expected=min_expected, max_bins=max_bins, order=order).hidden_mass


def pooled_nbins_uniform(k, n, *, min_expected=DEFAULT_MIN_EXPECTED, max_bins=DEFAULT_MAX_BINS):
    """Number of bins ``pool`` forms for the uniform law on ``k`` outcomes (via the same rule)."""
    if n <= 0:
        return 1
    return pool(np.full(k, 1.0 / k), n, min_expected=min_expected, max_bins=max_bins,
                order=np.arange(k)).nbins
