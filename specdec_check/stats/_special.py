"""The few distribution functions the tests need, through ``scipy.special`` instead of ``scipy.stats``, and
``logsumexp`` in plain numpy.

Importing ``scipy.stats`` costs about 1.0 s of CPU (0.5 s more than ``scipy.special`` and ``scipy.fft``), paid
by every run of the checker and every command line call, for six functions (issue 31). Each function below
returns the same float, bit for bit, as the ``scipy.stats`` call named in its docstring on the arguments this
package passes (same ufunc, same boundary rules of ``rv_discrete`` / ``rv_continuous``, same clipping).
``scipy.special.logsumexp`` goes through the array-API layer (about 0.3 ms a call on a few hundred values; the
calibrations of one default run make 1,644 calls); :func:`logsumexp` is its computation on real numpy arrays,
step for step. ``tests/stats/test_special.py`` compares each with the scipy original on grids that include
every boundary.
"""

from __future__ import annotations

import numpy as np
from scipy import special
from scipy.special import _ufuncs

__all__ = ["binom_cdf", "binom_sf", "logsumexp", "norm_isf", "poisson_cdf", "poisson_pmf", "poisson_sf"]


def _binom(which: str):
    """Boost's binomial ``sf`` or ``cdf`` ufunc, as ``scipy.stats.binom`` calls it (in ``scipy.special._ufuncs`` in
    recent scipy); where it is not there, ``scipy.stats.binom``'s own method (the same values, at the import's cost)."""
    ufunc = getattr(_ufuncs, f"_binom_{which}", None)
    if ufunc is not None:
        return ufunc
    from scipy import stats

    return getattr(stats.binom, which)


def binom_sf(k, n, p):
    """``scipy.stats.binom.sf(k, n, p)`` for integer ``n >= 0`` and ``0 <= p <= 1``: 1 below the support
    (k < 0), 0 from its top (k >= n), else Boost's binomial survival function at ``floor(k)``, clipped to [0, 1]."""
    k, n, p = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k, n, p)))
    inside = (k >= 0) & (k < n)
    out = np.where(k < 0, 1.0, 0.0)
    if inside.any():
        out[inside] = np.clip(_binom("sf")(np.floor(k[inside]), n[inside], p[inside]), 0, 1)
    return out


def binom_cdf(k, n, p):
    """``scipy.stats.binom.cdf(k, n, p)`` for integer ``n >= 0`` and ``0 <= p <= 1``: 0 below the support,
    1 from its top (k >= n), else Boost's binomial CDF at ``floor(k)``, clipped to [0, 1]."""
    k, n, p = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k, n, p)))
    inside = (k >= 0) & (k < n)
    out = np.where(k >= n, 1.0, 0.0)
    if inside.any():
        out[inside] = np.clip(_binom("cdf")(np.floor(k[inside]), n[inside], p[inside]), 0, 1)
    return out


def poisson_sf(k, mu):
    """``scipy.stats.poisson.sf(k, mu)`` for ``mu >= 0``: 1 below the support (k < 0), else
    ``scipy.special.pdtrc(floor(k), mu)`` clipped to [0, 1]."""
    k, mu = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k, mu)))
    inside = k >= 0
    out = np.where(inside, 0.0, 1.0)
    if inside.any():
        out[inside] = np.clip(special.pdtrc(np.floor(k[inside]), mu[inside]), 0, 1)
    return out


def poisson_cdf(k, mu):
    """``scipy.stats.poisson.cdf(k, mu)`` for ``mu >= 0``: 0 below the support, else
    ``scipy.special.pdtr(floor(k), mu)`` clipped to [0, 1]."""
    k, mu = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k, mu)))
    inside = k >= 0
    out = np.zeros(k.shape)
    if inside.any():
        out[inside] = np.clip(special.pdtr(np.floor(k[inside]), mu[inside]), 0, 1)
    return out


def poisson_pmf(k: int, mu: float) -> float:
    """``float(scipy.stats.poisson.pmf(k, mu))`` for an integer ``k >= 0`` and ``mu >= 0``:
    ``exp(xlogy(k, mu) - gammaln(k + 1) - mu)`` clipped to [0, 1]."""
    k, mu = np.float64(k), np.float64(mu)
    return float(np.clip(np.exp(special.xlogy(k, mu) - special.gammaln(k + 1) - mu), 0, 1))


def norm_isf(q: float) -> float:
    """``float(scipy.stats.norm.isf(q))`` for ``0 < q < 1``: ``-ndtri(q)`` (times the unit scale plus the
    zero location, as ``rv_continuous.isf`` computes it: -0.0 becomes 0.0)."""
    return float(-special.ndtri(np.float64(q)) * 1.0 + 0.0)


def logsumexp(a, axis=None):
    """``scipy.special.logsumexp(a, axis=axis)`` for a real array ``a`` (no weights, no sign): the same operations
    in the same order as scipy 1.15+ (Blanchard, Higham & Higham 2021, "Accurately computing the log-sum-exp and
    softmax functions"): the maximal elements are taken out of the sum,
    ``log1p(sum_{others} exp(a - max) / m) + log(m) + max`` with ``m`` the number of maximal elements, and the
    direct ``log(sum(exp(a)))`` where that is not finite."""
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    axes = tuple(range(a.ndim)) if axis is None else axis
    if a.size == 0:
        shape = np.asarray(a.shape)
        shape[axes] = 1
        out = np.full(tuple(shape), -np.inf)
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # values as scipy's; warnings off
            a_max = np.max(a, axis=axes, keepdims=True)
            at_max = a == a_max
            m = np.sum(at_max.astype(np.float64), axis=axes, keepdims=True, dtype=np.float64)
            shifted = np.exp(np.where(at_max, -np.inf, a) - a_max)
            total = np.sum(shifted, axis=axes, keepdims=True, dtype=np.float64)
            total = np.where(total == 0, total, total / m)
            sign = np.sign(total + 1) * np.sign(m)
            total = np.where(total < -1, -total - 2, total)
            out = np.log1p(total) + np.log(np.abs(m)) + a_max
            out[sign < 0] = np.nan
            finite = np.isfinite(out)
            if not finite.all():  # scipy computes this everywhere and keeps it where the above is not finite
                out = np.where(finite, out, np.log(np.sum(np.exp(a), axis=axes, keepdims=True)))
    out = np.squeeze(out, axis=axes)
    return out[()] if out.ndim == 0 else out
