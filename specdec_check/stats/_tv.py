"""Total-variation diagnostics: plug-in TV, its null expectation, certified upper bound."""
from __future__ import annotations

import numpy as np
from scipy import special

from ._validation import _alpha_iv, _counts_iv, _positive_int_iv, _probs_iv

__all__ = ["tv_distance", "expected_null_tv", "tv_upper_bound", "tv_deviation_radius", "tv_plugin_radius"]


def tv_distance(counts, probs):
    """Plug-in total variation ``TV(counts/n, probs) = 1/2 sum_i |counts_i/n - probs_i|``.

    Returns 0.0 when ``n == 0``.
    """
    probs = _probs_iv(probs)
    counts = _counts_iv(counts, len(probs))
    return _tv(counts, probs)


def _tv(counts, probs):
    n = int(counts.sum())
    if n == 0:
        return 0.0
    return float(0.5 * np.abs(counts / n - probs).sum())


def expected_null_tv(probs, n):
    """Exact ``E[TV(N/n, probs)]`` for ``N ~ Multinomial(n, probs)``.

    Each cell contributes the binomial mean absolute deviation, by De Moivre's
    closed form ``E|X - n p| = 2 nu (1 - p) b(nu; n, p)`` with ``nu = floor(n p) + 1``
    (Diaconis & Zabell 1991, "Closed form summation for classical distributions");
    ``E[TV] = sum_i E|N_i - n p_i| / (2 n)``.  Vectorised, O(k).
    """
    probs = _probs_iv(probs)
    n = _positive_int_iv(n, "n", minimum=0)
    return _expected_null_tv(probs, n)


def _expected_null_tv(probs, n):
    if n == 0:
        return 0.0
    p = probs[(probs > 0) & (probs < 1)]
    if p.size == 0:
        return 0.0
    nu = np.floor(n * p) + 1.0
    logb = (special.gammaln(n + 1.0) - special.gammaln(nu + 1.0) - special.gammaln(n - nu + 1.0)
            + nu * np.log(p) + (n - nu) * np.log1p(-p))
    mad = 2.0 * nu * (1.0 - p) * np.exp(logb)
    return float(mad.sum() / (2.0 * n))


def tv_deviation_radius(n, k, delta):
    """Radius r with ``P(TV(empirical, true law) >= r) <= delta`` for n samples on k outcomes.

    The smaller of two distribution-free bounds (both radii are deterministic, so
    the minimum keeps confidence ``1 - delta``):

    * Weissman, Ordentlich, Seroussi, Verdu & Weinberger 2003 (HPL-2003-97):
      ``P(||q_hat - q||_1 >= e) <= (2^k - 2) exp(-n e^2 / 2)``, i.e.
      ``TV <= sqrt((ln(2^k - 2) + ln(1/delta)) / (2 n))``;
    * McDiarmid's bounded-differences inequality with the mean bound of
      Canonne 2020 (arXiv:2002.11457): ``TV <= 1/2 sqrt((k-1)/n) + sqrt(ln(1/delta)/(2n))``.
    """
    if n <= 0:
        return 1.0
    k = max(int(k), 2)
    log2k = k * np.log(2.0) + np.log1p(-2.0 ** (1 - k)) if k < 60 else k * np.log(2.0)
    weissman = np.sqrt((log2k + np.log(1.0 / delta)) / (2.0 * n))
    mcdiarmid = 0.5 * np.sqrt((k - 1) / n) + np.sqrt(np.log(1.0 / delta) / (2.0 * n))
    return float(min(1.0, weissman, mcdiarmid))


def tv_plugin_radius(n, delta):
    """Dimension-free radius ``sqrt(ln(1/delta) / (2 n))`` of the plug-in TV against a known law.

    For ``n`` i.i.d. draws from any law ``q`` and any fixed ``p``, the plug-in
    ``TV(q_hat, p)`` has bounded differences ``1/n`` (moving one draw moves ``1/n``
    of mass), so McDiarmid's inequality gives ``TV(q_hat, p) >= E TV(q_hat, p) - r``
    with probability ``>= 1 - delta``; and ``E TV(q_hat, p) >= TV(E q_hat, p) =
    TV(q, p)`` by convexity (Jensen).  Hence ``TV(q, p) <= TV(q_hat, p) + r``.
    It never exceeds :func:`tv_deviation_radius` (which bounds ``TV(q_hat, q)``, a
    harder quantity), and does not grow with the support size.
    """
    if n <= 0:
        return 1.0
    return float(min(1.0, np.sqrt(np.log(1.0 / delta) / (2.0 * n))))


def _tv_radius(n, k, delta):
    """The smaller of the two radii (both deterministic, so the bound keeps confidence ``1 - delta``)."""
    return min(tv_deviation_radius(n, k, delta), tv_plugin_radius(n, delta))


def tv_upper_bound(counts, probs, *, delta):
    """Certified upper bound on ``TV(sampler law, probs)`` at confidence ``1 - delta``.

    ``TV(q_hat, p) + r`` with ``r`` the smaller of two deterministic radii (so the
    chosen one is fixed before the data and the confidence stays ``1 - delta``):

    * :func:`tv_plugin_radius` (McDiarmid on the plug-in TV, with ``E TV(q_hat, p)
      >= TV(q, p)`` by convexity): ``sqrt(ln(1/delta) / (2n))``, dimension-free;
    * :func:`tv_deviation_radius` (triangle inequality with the deviation of the
      empirical law, Weissman et al. 2003 / McDiarmid-Canonne 2020); it is never the
      smaller one, and is kept for comparison.

    The plug-in TV of a correct sampler is itself ``~ sqrt(k / n)`` (see
    :func:`expected_null_tv`), so certifying ``eps`` needs ``n ~ k / eps^2``: a
    diagnostic, not a pass criterion.
    """
    probs = _probs_iv(probs)
    counts = _counts_iv(counts, len(probs))
    delta = _alpha_iv(delta, "delta")
    n = int(counts.sum())
    return float(min(1.0, _tv(counts, probs) + _tv_radius(n, len(probs), delta)))
