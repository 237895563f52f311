"""Randomized probability integral transform for per-row conditional laws + uniformity test."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._identity import identity_test
from ._results import TestResultMixin
from ._validation import _alpha_iv, _positive_int_iv, _probs_iv, _rng_iv

__all__ = ["UniformityTestResult", "randomized_pit", "pit_test", "pit_support_violations"]

_BLOCK = 1 << 16


@dataclass(frozen=True)
class UniformityTestResult(TestResultMixin):
    """Result of :func:`pit_test`; ``support_violations`` are ``(sample_index, outcome)`` pairs."""

    statistic: float
    pvalue: float
    alpha: float
    n: int
    bins: int
    method: str
    support_violations: tuple



def _pit_iv(samples, probs_rows, row_index):
    x = np.asarray(samples)
    if x.ndim != 1 or not (np.issubdtype(x.dtype, np.integer) or
                           (np.issubdtype(x.dtype, np.floating) and np.all(x == np.round(x)))):
        raise ValueError(f"`samples` must be a 1-d array of integer outcomes; got shape {x.shape}, dtype {x.dtype}.")
    x = x.astype(np.int64)
    P = np.asarray(probs_rows)
    if P.ndim != 2:
        raise ValueError(f"`probs_rows` must be 2-d [rows, V]; got shape {P.shape}.")
    if row_index is None:
        if P.shape[0] != len(x):
            raise ValueError(f"`probs_rows` has {P.shape[0]} rows but there are {len(x)} samples; "
                             "give one row per sample or pass `row_index`.")
        ri = None
    else:
        ri = np.asarray(row_index)
        if ri.shape != x.shape or not np.issubdtype(ri.dtype, np.integer):
            raise ValueError("`row_index` must be an int array with one entry per sample.")
        if len(ri) and (ri.min() < 0 or ri.max() >= P.shape[0]):
            raise ValueError(f"`row_index` entries must lie in [0, {P.shape[0]}).")
    V = P.shape[1]
    if len(x) and (x.min() < 0 or x.max() >= V):
        i = int(np.flatnonzero((x < 0) | (x >= V))[0])
        raise ValueError(f"sample {i} is outcome {x[i]}, outside the vocabulary [0, {V}).")
    P = _probs_iv(probs_rows, "probs_rows", ndim=2, normalize=False)  # rows renormalised per block
    return x, P, ri


def _gather(P, x, ri, lo, hi):
    rows = P[lo:hi] if ri is None else P[ri[lo:hi]]
    xs = x[lo:hi]
    rows = rows / rows.sum(axis=1, keepdims=True)
    px = rows[np.arange(hi - lo), xs]
    below = np.where(np.arange(rows.shape[1])[None, :] < xs[:, None], rows, 0.0).sum(axis=1)
    return below, px


def pit_support_violations(samples, probs_rows, *, row_index=None):
    """``(sample_index, outcome)`` pairs for samples on outcomes of probability 0 in their row."""
    return _violations(*_pit_iv(samples, probs_rows, row_index))


def _violations(x, P, ri):
    rows = np.arange(len(x)) if ri is None else ri
    bad = np.flatnonzero(P[rows, x] == 0)
    return [(int(i), int(x[i])) for i in bad]


def randomized_pit(samples, probs_rows, *, rng, row_index=None):
    """Randomized PIT ``u_i = F_i(x_i - 1) + U_i P_i(x_i)``, ``U_i ~ Uniform(0, 1)`` from ``rng``.

    If each ``x_i`` is an independent draw from its row's categorical law ``P_i``,
    the ``u_i`` are exactly i.i.d. Uniform(0, 1) (Brockwell 2007, "Universal residuals:
    a multivariate transformation", Stat. Probab. Lett. 77; Czado, Gneiting & Held
    2009, Biometrics 65).  ``probs_rows`` is ``[n, V]``, or ``[m, V]`` with
    ``row_index`` (int ``[n]``) selecting each sample's row.  A sample on a
    zero-probability outcome is a support violation: ``ValueError`` naming it
    (use :func:`pit_test`, which reports violations instead).
    """
    rng = _rng_iv(rng)
    return _randomized_pit(*_pit_iv(samples, probs_rows, row_index), rng)


def _randomized_pit(x, P, ri, rng):
    n = len(x)
    u = np.empty(n)
    U = rng.random(n)
    for lo in range(0, n, _BLOCK):
        hi = min(n, lo + _BLOCK)
        below, px = _gather(P, x, ri, lo, hi)
        if np.any(px == 0):
            i = lo + int(np.flatnonzero(px == 0)[0])
            raise ValueError(f"support violation: sample {i} is outcome {x[i]}, which has probability 0 "
                             "in its row; the sampler produced an impossible outcome.")
        u[lo:hi] = np.minimum(below + U[lo:hi] * px, np.nextafter(1.0, 0.0))
    return u


def pit_test(samples, probs_rows, *, alpha, rng, bins=None, row_index=None):
    """Randomized PIT followed by an exact uniformity test of the ``u_i``.

    The ``u_i`` are counted in ``bins`` equal-width bins (default
    ``clip(min(2 n^0.4, n/5), 2, 1000)``, after Mann & Wald 1942: PIT departures
    are smooth, so many narrow bins waste power), which are exactly ``Multinomial(n, uniform)`` under the null, and tested
    with :func:`identity_test` (exact, conservative).  Support violations give
    ``pvalue = 0`` and are listed as ``(sample_index, outcome)``.
    """
    alpha = _alpha_iv(alpha)
    rng = _rng_iv(rng)
    x, P, ri = _pit_iv(samples, probs_rows, row_index)
    n = len(x)
    if bins is None:
        # PIT departures are usually smooth in u, so fewer bins than n/20 buy power;
        # Mann & Wald 1942-style growth ~ n^(2/5), at least 5 expected per bin
        bins = int(min(1000, max(2, min(2.0 * n ** 0.4, n / 5.0))))
    else:
        bins = _positive_int_iv(bins, "bins", minimum=2)
    viol = _violations(x, P, ri)
    if viol:
        return UniformityTestResult(statistic=float("inf"), pvalue=0.0, alpha=alpha, n=n, bins=bins,
                                    method=f"support violation: {len(viol)} sample(s) on zero-probability "
                                           f"outcomes (first: sample {viol[0][0]}, outcome {viol[0][1]})",
                                    support_violations=tuple(viol[:1000]))
    u = _randomized_pit(x, P, ri, rng)
    counts = np.bincount(np.minimum((u * bins).astype(np.int64), bins - 1), minlength=bins)
    res = identity_test(counts, np.full(bins, 1.0 / bins), alpha=alpha)
    return UniformityTestResult(statistic=res.statistic, pvalue=res.pvalue, alpha=alpha, n=n, bins=bins,
                                method=f"randomized PIT + {bins} equal-width bins; {res.method}",
                                support_violations=())
