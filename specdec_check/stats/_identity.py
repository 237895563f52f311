"""Identity (goodness-of-fit) test of observed counts against an exactly known law."""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from . import _lattice
from ._pooling import DEFAULT_MAX_BINS, DEFAULT_MIN_EXPECTED, pool, sorted_order
from ._power import _detect, _poisson_at_mean, route_for, vv_weights
from ._results import TestResultMixin
from ._special import binom_cdf, binom_sf, poisson_cdf, poisson_sf
from ._tv import _expected_null_tv, _tv, _tv_radius
from ._validation import _alpha_iv, _counts_iv, _probs_iv

__all__ = ["IdentityTestResult", "identity_pvalues", "identity_test", "support_violations", "vv_weights", "worst_cells"]

N_PARTS = 2  # Bonferroni split of alpha: global (weighted unbiased chi-square), max-cell
_CHUNK = 1 << 21  # cells per chunk of rows in identity_pvalues (keeps int64 temporaries ~16 MiB)
_ORDER_CACHE: "OrderedDict[bytes, np.ndarray]" = OrderedDict()


@dataclass(frozen=True)
class IdentityTestResult(TestResultMixin):
    """Result of :func:`identity_test`.

    ``statistic`` is the weighted bias-corrected chi-square ``Z_w`` of the pooled bins
    (0 if not computed); ``pvalue`` a valid (conservative) p-value of the union
    "global or max-cell"; ``bins`` the number of pooled bins; ``worst_cells`` up to
    five standardised residuals ``(O - E) / sqrt(E)`` on the original outcome indices.
    ``min_detectable_tv`` is the TV this run (its ``n``, bins and ``alpha``) detects
    with power 0.99 (:func:`specdec_check.stats.detectability`), of which
    ``hidden_tv`` is what pooling can hide; ``tv_upper`` a certified bound on the TV
    at confidence ``1 - alpha``.  ``calibration`` says how the global part's null law
    was obtained (``conditional``: exact fixed-n law; ``penalized``: exact Poisson
    law divided by ``P(T = n)``; ``poisson``: exact law of a Poissonized sample size).
    ``pvalue_weighted`` repeats ``pvalue_global`` (kept for compatibility).
    """

    statistic: float
    pvalue: float
    alpha: float
    n: int
    bins: int
    method: str
    support_violations: tuple
    worst_cells: tuple
    tv_plugin: float
    tv_null_mean: float
    tv_upper: float
    min_detectable_tv: float
    pvalue_global: float = 1.0
    pvalue_maxcell: float = 1.0
    pvalue_weighted: float = 1.0
    hidden_tv: float = 0.0
    calibration: str = ""


def support_violations(counts, probs):
    """Indices of outcomes with ``counts > 0`` but ``probs == 0`` (an immediate failure)."""
    probs = _probs_iv(probs)
    counts = _counts_iv(counts, len(probs))
    return np.flatnonzero((counts > 0) & (probs == 0))


def _options_iv(min_expected, poisson_mean, conditional):
    try:
        min_expected = float(min_expected)
    except (TypeError, ValueError):
        raise ValueError(f"`min_expected` must be a positive number; got {min_expected!r}.") from None
    if not (min_expected > 0 and np.isfinite(min_expected)):
        raise ValueError(f"`min_expected` must be a positive number; got {min_expected!r}.")
    if poisson_mean is not None:
        try:
            poisson_mean = float(poisson_mean)
        except (TypeError, ValueError):
            raise ValueError(f"`poisson_mean` must be a positive number; got {poisson_mean!r}.") from None
        if not (poisson_mean > 0 and np.isfinite(poisson_mean)):
            raise ValueError(f"`poisson_mean` must be a positive number (the mean of the Poisson law the "
                             f"sample size was drawn from); got {poisson_mean!r}.")
    if conditional not in ("auto", True, False):
        raise ValueError(f"`conditional` must be 'auto', True or False; got {conditional!r}.")
    return min_expected, poisson_mean


def _order(probs):
    key = hashlib.blake2b(probs.tobytes(), digest_size=16).digest()
    hit = _ORDER_CACHE.get(key)
    if hit is None:
        hit = sorted_order(probs)
        _ORDER_CACHE[key] = hit
        if len(_ORDER_CACHE) > 32:
            _ORDER_CACHE.popitem(last=False)
    return hit


def worst_cells(counts, probs, *, m: int = 5) -> tuple:
    """The ``m`` cells whose counts stray furthest from ``n * probs``: Pearson residuals
    ``(counts - n p) / sqrt(n p)`` (the terms of Pearson's 1900 chi-square statistic), largest
    magnitude first, as ``{"index", "observed", "expected", "residual"}`` dicts. ``counts`` are
    non-negative integers [k] and ``probs`` a law [k] (it need not be normalised; it is)."""
    counts = np.asarray(counts, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    if counts.ndim != 1 or probs.shape != counts.shape:
        raise ValueError(f"counts and probs must be 1-d arrays of one length, got shapes {counts.shape} and "
                         f"{probs.shape}")
    if (counts < 0).any() or not np.isfinite(probs).all() or (probs < 0).any() or probs.sum() <= 0:
        raise ValueError("counts must be non-negative and probs finite, non-negative and not all zero")
    n = int(counts.sum())
    return _worst_cells(counts, probs / probs.sum(), n, m) if n > 0 else ()


def _worst_cells(counts, probs, n, m=5):
    mu = n * probs
    pos = np.flatnonzero(mu > 0)
    r = (counts[pos] - mu[pos]) / np.sqrt(mu[pos])
    if len(r) > m:
        top = np.argpartition(-np.abs(r), m)[:m]
    else:
        top = np.arange(len(r))
    top = top[np.lexsort((pos[top], -np.abs(r[top])))]
    return tuple({"index": int(pos[j]), "observed": int(counts[pos[j]]),
                  "expected": float(mu[pos[j]]), "residual": float(r[j])} for j in top)


@dataclass(frozen=True)
class _Calibrated:
    table: object
    law: object
    route: str
    divisor: float


def _calibrate(bin_probs, n, poisson_mean, conditional):
    """Tables and exact null law of the global part for bins ``bin_probs`` (cached in _lattice)."""
    scale = poisson_mean if poisson_mean is not None else n
    table = _lattice.z_table(scale * bin_probs, vv_weights(bin_probs))
    route = route_for(table, n, "poisson" if poisson_mean is not None else "fixed", conditional)
    if route == "conditional":
        return _Calibrated(table, _lattice.conditional_law(table, n), route, 1.0)
    if route == "chernoff":
        return _Calibrated(table, _lattice.chernoff_conditional_law(table, n), route, 1.0)
    divisor = _poisson_at_mean(n) if route == "penalized" else 1.0
    return _Calibrated(table, _lattice.poisson_law(table), route, divisor)


def _pooled_pvalues(obs, bin_probs, n, cal, poisson_mean=None, with_statistic=True):
    """Vectorised core on rows of pooled counts ``obs [R, B]``.

    Returns ``(Z_w, p_global, p_maxcell, pvalue)`` arrays of length R (``Z_w`` None
    unless ``with_statistic``).
    """
    B = len(bin_probs)
    Z = cal.table.statistic(obs) if with_statistic else None
    p_global = np.minimum(1.0, cal.law.sf(cal.table.index_of(obs)) / cal.divisor)
    p_max = np.minimum(1.0, 2.0 * B * _min_cell_tail(obs, bin_probs, n, poisson_mean))
    pvalue = np.minimum(1.0, N_PARTS * np.minimum(p_global, p_max))
    return Z, p_global, p_max, pvalue


def _min_cell_tail(obs, bin_probs, n, poisson_mean):
    """``min_b min(P(N_b >= obs_b), P(N_b <= obs_b))`` per row, exact binomial (fixed n) or Poisson
    tails; evaluated once per bin and count in the observed range (rows share the tables)."""
    bp = np.minimum(bin_probs, 1.0)
    lo, hi = obs.min(axis=0), obs.max(axis=0)
    lens = hi - lo + 1
    start = np.r_[0, np.cumsum(lens)[:-1]]
    b = np.repeat(np.arange(len(bp)), lens)
    x = np.repeat(lo, lens) + np.arange(lens.sum()) - np.repeat(start, lens)
    if poisson_mean is None:  # exact binomial marginals of the multinomial
        tail = np.minimum(binom_sf(x - 1, n, bp[b]), binom_cdf(x, n, bp[b]))
    else:                     # independent Poisson bins
        tail = np.minimum(poisson_sf(x - 1, poisson_mean * bp[b]), poisson_cdf(x, poisson_mean * bp[b]))
    return tail[start[None, :] + obs - lo[None, :]].min(axis=-1)


def identity_pvalues(counts, probs, *, min_expected=DEFAULT_MIN_EXPECTED, max_bins=DEFAULT_MAX_BINS,
                     poisson_mean=None, conditional="auto"):
    """P-values of :func:`identity_test` for many rows of counts at once.

    ``counts`` is ``[R, k]``; all rows must have the same total ``n`` (fixed-n) unless
    ``poisson_mean`` is given (then totals may differ; see :func:`identity_test`).
    Used for calibration and power simulations.  Support violations give p-value 0.
    """
    probs = _probs_iv(probs)
    min_expected, poisson_mean = _options_iv(min_expected, poisson_mean, conditional)
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] != len(probs):
        raise ValueError(f"`counts` must be 2-d [runs, {len(probs)}]; got shape {counts.shape}.")
    n_all = counts.sum(axis=1)
    if poisson_mean is None and len(n_all) and np.any(n_all != n_all[0]):
        raise ValueError("all rows of `counts` must have the same total n (or give `poisson_mean`).")
    viol = ((counts > 0) & (probs == 0)[None, :]).any(axis=1)
    n = int(n_all[0]) if len(n_all) else 0
    if poisson_mean is None and n == 0:
        return np.where(viol, 0.0, 1.0)
    size = poisson_mean if poisson_mean is not None else n
    pl = pool(probs, size, min_expected=min_expected, max_bins=max_bins, order=_order(probs))
    if pl.nbins < 2:
        return np.where(viol, 0.0, 1.0)
    cal = _calibrate(pl.bin_probs, n, poisson_mean, conditional)
    p = np.empty(len(counts))
    step = max(1, _CHUNK // max(1, counts.shape[1]))
    starts = pl.bin_starts()
    for r in range(0, len(counts), step):  # rows in chunks: the temporaries stay ~_CHUNK cells
        obs = np.add.reduceat(counts[r:r + step][:, pl.order], starts, axis=1).astype(np.int64)
        p[r:r + step] = _pooled_pvalues(obs, pl.bin_probs, n, cal, poisson_mean, with_statistic=False)[-1]
    return np.where(viol, 0.0, p)


def identity_test(counts, probs, *, alpha, min_expected=DEFAULT_MIN_EXPECTED, poissonized=False,
                  max_bins=DEFAULT_MAX_BINS, poisson_mean=None, conditional="auto"):
    """Test ``H0: counts ~ Multinomial(n, probs)`` with exact, conservative calibration.

    Procedure (statistics.md sections 1.2-1.4, 8):

    1. Support check: any count on an outcome with ``probs == 0`` => ``pvalue = 0``.
    2. Pool outcomes on *expected* counts only: singletons when ``n p_i >=
       min_expected``, the light tail grouped consecutively in decreasing-probability
       order into bins of about ``min_expected`` (no cap on the number of bins).
    3. Global part: the bias-corrected chi-square of Acharya, Daskalakis & Kamath
       (2015, arXiv:1507.05952) ``sum_b w_b ((N_b - mu_b)^2 - N_b) / mu_b`` with the
       Valiant & Valiant (2014) weights ``w_b = (P_b / max P)^(1/3)`` (minimax over the
       TV ball; 1 for a uniform law), each term truncated far out at ``TAU``.  Its
       exact null law is computed on a lattice with every truncation moved to the
       rejecting side (Perkins, Tygert & Ward 2011; :mod:`._lattice`):
       - fixed ``n`` (default): the exact conditional law given the total
         (``conditional="auto"`` while it is cheap, ``True`` to force it); otherwise
         the smaller of two valid bounds of that law: a Chernoff bound with the
         exact conditional moment generating function, and the Poisson law divided
         by ``P(Poisson(n) = n) ~ 1 / sqrt(2 pi n)`` (``P(A | T = n) <= P(A) / P(T = n)``,
         Mitzenmacher & Upfal 2005, Thm 5.7; alone when ``conditional=False`` or
         when even the Chernoff bound is too costly);
       - ``poisson_mean=lam``: the sample size was drawn from ``Poisson(lam)``
         independently of the samples, so the bins are independent Poisson counts and
         the exact Poisson law applies directly (no penalty).
    4. Max-cell part: exact binomial (Poisson) tails of every pooled bin, two-sided,
       Bonferroni over bins.
    5. ``pvalue = min(1, 2 min(p_global, p_maxcell))`` (alpha split in halves).

    ``tv_upper`` is a certified bound at confidence ``1 - alpha`` (see
    :func:`tv_upper_bound`); ``min_detectable_tv`` is the achieved detectable TV at
    power 0.99 of this very run (:func:`detectability`).  ``poissonized`` without
    ``poisson_mean`` is only recorded in ``method``.
    """
    probs = _probs_iv(probs)
    counts = _counts_iv(counts, len(probs))
    alpha = _alpha_iv(alpha)
    min_expected, poisson_mean = _options_iv(min_expected, poisson_mean, conditional)
    k = len(probs)
    n = int(counts.sum())
    sampling = "Poissonized" if (poissonized or poisson_mean is not None) else "fixed-n"
    viol = np.flatnonzero((counts > 0) & (probs == 0))
    tv_plug = _tv(counts, probs)
    tv_null = _expected_null_tv(probs, n)
    if len(viol):
        return IdentityTestResult(
            statistic=float("inf"), pvalue=0.0, alpha=alpha, n=n, bins=0,
            method=f"support violation: {len(viol)} outcome(s) with probability 0 observed "
                   f"(first: index {int(viol[0])}, count {int(counts[viol[0]])})",
            support_violations=tuple(int(i) for i in viol[:1000]),
            worst_cells=(), tv_plugin=tv_plug, tv_null_mean=tv_null,
            tv_upper=1.0, min_detectable_tv=1.0, pvalue_global=0.0, pvalue_maxcell=0.0, pvalue_weighted=0.0)
    tv_up = float(min(1.0, tv_plug + _tv_radius(n, k, alpha)))
    if n == 0 and poisson_mean is None:
        return IdentityTestResult(0.0, 1.0, alpha, 0, 0, "no observations (n = 0)", (), (),
                                  0.0, 0.0, 1.0, 1.0)
    size = poisson_mean if poisson_mean is not None else n
    pl = pool(probs, size, min_expected=min_expected, max_bins=max_bins, order=_order(probs))
    B = pl.nbins
    worst = _worst_cells(counts, probs, n) if n > 0 else ()
    if B < 2:
        return IdentityTestResult(0.0, 1.0, alpha, n, B,
                                  f"not testable: all mass pools into one bin at n={n} ({sampling})",
                                  (), worst, tv_plug, tv_null, tv_up, 1.0)
    obs = pl.bin_counts(counts)
    cal = _calibrate(pl.bin_probs, n, poisson_mean, conditional)
    Z, p_global, p_max, pvalue = (float(a[0]) for a in
                                  _pooled_pvalues(obs[None, :], pl.bin_probs, n, cal, poisson_mean))
    det = _detect(pl, int(round(size)), alpha, 0.99, "poisson" if poisson_mean is not None else "fixed",
                  conditional)
    how = {"conditional": "exact fixed-n (conditional) lattice law",
           "chernoff": "min of a Chernoff bound on the exact fixed-n law and the Poisson law / P(T = n)",
           "penalized": "exact Poisson lattice law / P(T = n)",
           "poisson": f"exact Poisson lattice law (Poissonized, mean {size:g})"}[cal.route]
    method = (f"Valiant-Valiant-weighted unbiased chi-square ({how}) + max-cell exact "
              f"{'binomial' if poisson_mean is None else 'Poisson'}, alpha split in halves, "
              f"{B} bins pooled on expected counts (smallest bin expects {float(size * pl.bin_probs.min()):.3g}, "
              f"pooling hides at most TV {pl.hidden_mass:.3g}), {sampling} counts")
    return IdentityTestResult(
        statistic=Z, pvalue=pvalue, alpha=alpha, n=n, bins=B, method=method,
        support_violations=(), worst_cells=worst, tv_plugin=tv_plug, tv_null_mean=tv_null,
        tv_upper=tv_up, min_detectable_tv=float(det.min_detectable_tv), pvalue_global=p_global,
        pvalue_maxcell=p_max, pvalue_weighted=p_global, hidden_tv=float(pl.hidden_mass), calibration=cal.route)
