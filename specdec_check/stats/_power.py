"""Power planning: samples needed to detect a TV deviation, and its inverse.

Two canonical alternatives at ``TV(q, probs) = eps`` (statistics.md sections 5, 8):

* diffuse: ``q_i = p_i (1 +- 2 eps)`` on two halves of equal p-mass taken in the
  pooling order (so that pooling keeps the whole deviation), ``chi2(q||p) = 4 eps^2``
  (the Cauchy-Schwarz worst case).  Power of the G test on B pooled bins from the
  noncentral chi-square approximation ``ncx2(B, n chi2)`` at the G share (1/3) of alpha
  (Cohen 1988; Read & Cressie 1988);
* concentrated: mass ``eps`` moved out of (or into) one bin; power of the
  max-cell test from the normal approximation to the binomial at the max-cell share
  ``alpha / (6 B)`` per tail.  (The third part, the weighted G, only adds power.)

Both use the *effective* alpha of :func:`identity_test` (which pays a factor
``P(Poisson(n) = n)`` for conditioning its Poisson calibration on the total), and
a safety factor; the promise is checked by simulation in the test suite.
"""
from __future__ import annotations

import numpy as np
from scipy import optimize, stats

from ._pooling import DEFAULT_MAX_BINS, pool, pooled_nbins_uniform, sorted_order
from ._validation import _alpha_iv, _positive_int_iv, _probs_iv

__all__ = ["samples_for", "min_detectable_tv"]

SAFETY = 1.10  # multiplicative safety on the detectable TV (sample sizes ~ SAFETY^2)


def _poisson_at_mean(n):
    return float(stats.poisson.pmf(n, n)) if n > 0 else 1.0


def _mdtv_bins(n, nbins, vmax, alpha, power):
    if n <= 0 or nbins < 2:
        return 1.0
    beta = 1.0 - power
    # diffuse: G on pooled bins
    a_g = alpha / 3.0 * _poisson_at_mean(n)
    thr = stats.chi2.isf(a_g, nbins)
    f = lambda lam: stats.ncx2.sf(thr, nbins, lam) - power
    hi = 10.0 * thr + 100.0
    while f(hi) < 0:
        hi *= 2
    lam = optimize.brentq(f, 1e-9, hi, xtol=1e-6, rtol=1e-8)
    eps_d = np.sqrt(lam / (4.0 * n))
    # concentrated: max-cell on the bin of largest variance
    z = stats.norm.isf(alpha / (6.0 * nbins)) + stats.norm.isf(beta)
    eps_s = z * np.sqrt(vmax / n)
    return float(min(1.0, SAFETY * max(eps_d, eps_s)))


def _plan_iv(probs, support_size, alpha, power):
    alpha = _alpha_iv(alpha)
    power = _alpha_iv(power, "power")
    if (probs is None) == (support_size is None):
        raise ValueError("Give exactly one of `probs` (the known law) or `support_size` "
                         "(then a uniform law on that many outcomes is assumed).")
    if probs is not None:
        probs = _probs_iv(probs)
    else:
        support_size = _positive_int_iv(support_size, "support_size", minimum=2)
    return probs, support_size, alpha, power


def _planner(probs, support_size, min_expected, max_bins):
    if probs is not None:
        order = sorted_order(probs)

        def bins(n):
            pl = pool(probs, n, min_expected=min_expected, max_bins=max_bins, order=order)
            bp = pl.bin_probs
            return pl.nbins, float(np.max(bp * (1 - bp)))
    else:
        k = support_size

        def bins(n):
            B = pooled_nbins_uniform(k, n, min_expected=min_expected, max_bins=max_bins)
            pb = 1.0 / B
            return B, pb * (1 - pb)
    return bins


def min_detectable_tv(n, *, probs=None, support_size=None, alpha, power=0.99,
                      min_expected=5.0, max_bins=DEFAULT_MAX_BINS):
    """Smallest TV ``eps`` that :func:`identity_test` detects with the given power at ``n``.

    ``max`` of the diffuse (noncentral chi-square, Cohen 1988) and concentrated
    (max-cell, normal approximation to the binomial tail) requirements; see the
    module docstring.  Exactly one of ``probs`` / ``support_size`` (uniform law).
    """
    probs, support_size, alpha, power = _plan_iv(probs, support_size, alpha, power)
    n = _positive_int_iv(n, "n", minimum=0)
    B, v = _planner(probs, support_size, min_expected, max_bins)(n)
    return _mdtv_bins(n, B, v, alpha, power)


def samples_for(eps, *, probs=None, support_size=None, alpha, power=0.99,
                min_expected=5.0, max_bins=DEFAULT_MAX_BINS):
    """Samples needed for :func:`identity_test` to detect ``TV >= eps`` (diffuse or concentrated).

    ``n = max(n_diffuse, n_sparse)`` (statistics.md section 8): the smallest ``n``
    with ``min_detectable_tv(n) <= eps``, found by bisection.  Exactly one of
    ``probs`` / ``support_size`` (then the uniform law is assumed).
    """
    probs, support_size, alpha, power = _plan_iv(probs, support_size, alpha, power)
    try:
        eps = float(eps)
    except (TypeError, ValueError):
        raise ValueError(f"`eps` must be a TV distance in (0, 1]; got {eps!r}.") from None
    if not (0 < eps <= 1):
        raise ValueError(f"`eps` must be a TV distance in (0, 1]; got {eps!r}.")
    bins = _planner(probs, support_size, min_expected, max_bins)

    def ok(n):
        B, v = bins(n)
        return _mdtv_bins(n, B, v, alpha, power) <= eps

    hi = 16
    while not ok(hi):
        hi *= 2
        if hi > 2**62:
            raise ValueError("`eps` too small: no feasible sample size.")
    lo = hi // 2
    while hi - lo > max(1, hi // 2000):
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return int(hi)
