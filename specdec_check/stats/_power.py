"""Power planning of :func:`identity_test`: detectable TV at ``n`` and samples for a TV.

The planner models the test as it is run (statistics.md sections 1.2, 5, 8):

* the cells are pooled on expected counts at ``n`` (:mod:`._pooling`, no bin cap);
  pooling can hide ``hidden`` TV inside bins (any law ``q`` has
  ``TV_bins >= TV(q, p) - hidden``), so ``min_detectable_tv = hidden + visible``;
* the global part is the bias-corrected chi-square with Valiant-Valiant weights
  ``w_b = (P_b / max P)^(1/3)`` (Acharya, Daskalakis & Kamath 2015; Valiant &
  Valiant 2014), rejecting above the ``alpha / 2`` quantile of its null law on the
  route the test takes at ``n`` (:func:`route_for`, see :func:`_z_threshold`);
* ``visible`` is the largest of three worst cases at bin level:
  - the Valiant-Valiant least favourable deviation ``delta_b ∝ +-P_b^(2/3)``
    (it minimises the mean of the weighted statistic for a given TV, so it is the
    worst case over the TV ball for this statistic); the ``sqrt(B) / eps^2`` rate
    of uniformity testing (Paninski 2008) is its special case ``P_b = 1 / B``;
  - the diffuse deviation ``delta_b ∝ +-P_b`` (``chi2 = 4 eps^2``, the
    Cauchy-Schwarz worst case of unweighted statistics; random signs give the same);
  - the concentrated one (``eps`` moved between the two heaviest bins), caught by
    the max-cell part (exact binomial tails, Bonferroni over bins, ``alpha / 2``)
    or by the global part, whichever needs less;
  for each, the power of the global part is the normal approximation with the exact
  Poisson moments ``E Z_b = n delta^2 / P``, ``Var Z_b = 2 nu^2 / mu^2 + 4 d^2 nu / mu^2``
  (ADK 2015; ``mu = n P``, ``nu = n Q``, ``d = nu - mu``), which is conservative for
  the right-skewed laws involved; the max-cell part uses the normal approximation
  to the binomial (as before).
* ``SAFETY`` multiplies the visible part for what the approximations miss; the
  promise (power >= ``power`` at ``samples_for``) is measured in
  ``benchmarks/bench_power.py`` and tests/stats/test_power.py.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from . import _lattice
from ._pooling import DEFAULT_MAX_BINS, DEFAULT_MIN_EXPECTED, pool, sorted_order
from ._results import to_builtin
from ._roots import brent_root
from ._special import norm_isf, poisson_pmf
from ._validation import _alpha_iv, _positive_int_iv, _probs_iv

__all__ = ["Detectability", "detectability", "min_detectable_tv", "samples_for"]

SAFETY = 1.05   # on the visible detectable TV (sample sizes ~ SAFETY^2); measured margin in bench_power.py
COND_WORK = 1.5e7  # the exact conditional null is used while its work (D M W log2 W) is below this
                   # (~10-40 ms); beyond, the Chernoff-conditional bound, then the penalized Poisson law
CHERNOFF_WORK = 2e8  # the Chernoff-conditional bound while 24 D M log2 M is below this (~0.1-0.3 s)
SAMPLINGS = ("fixed", "poisson")


def _poisson_at_mean(n):
    return poisson_pmf(n, n) if n > 0 else 1.0


def vv_weights(bin_probs):
    """Valiant & Valiant 2014 weighting relative to Pearson: ``(P_b / max P)^(1/3)``.

    Their instance-optimal statistic weights ``(N - mu)^2 - N`` by ``p^(-2/3) =
    p^(1/3) / p``; minimax over the TV ball, this weighting maximises the worst-case
    signal-to-noise ratio of ``sum_b w_b ((N_b - mu_b)^2 - N_b) / mu_b`` (Lagrange:
    ``w ∝ P^(1/3)``), and equals the unweighted statistic for a uniform law.
    """
    bin_probs = np.asarray(bin_probs, dtype=np.float64)
    return (bin_probs / bin_probs.max()) ** (1.0 / 3.0)


def route_for(table, n, sampling="fixed", conditional="auto"):
    """How :func:`identity_test` calibrates its global part at ``n``.

    ``"poisson"``: Poissonized sample size, exact Poisson law; fixed ``n``:
    ``"conditional"`` (exact conditional law, while its work is below ``COND_WORK``
    or when forced), else ``"chernoff"`` (the smaller of a Chernoff bound of the
    conditional law and the Poisson law / ``P(T = n)``, while its work is below
    ``CHERNOFF_WORK``), else ``"penalized"`` (Poisson law / ``P(T = n)``).
    """
    if sampling == "poisson":
        return "poisson"
    if conditional is True:
        return "conditional"
    if conditional is False:
        return "penalized"
    if _lattice.conditional_cost(table, n) <= COND_WORK:
        return "conditional"
    if _lattice.chernoff_cost(table, n) <= CHERNOFF_WORK:
        return "chernoff"
    return "penalized"


def _z_threshold(table, n, alpha_share, route):
    """Rejection threshold of the global part, as a shift of ``Z_w`` above its null mean.

    The test's own threshold on the ``"poisson"``, ``"penalized"`` and ``"chernoff"``
    routes.  On the ``"conditional"`` route the Poisson quantile is used instead
    (cheaper: no tilted conditional pass): conditioning on the total removes the
    ``(T - n)^2 / n`` component, so the conditional quantile is the smaller one
    (checked in the tests) and the plan stays on the safe side.  The lattice
    statistic ``S`` rounds every bin's term; the rounding has a systematic part (a
    fixed shift of the null and, to first order, of every nearby alternative), so
    the threshold is measured from the exact null mean of ``S``.
    """
    if route == "chernoff":
        s = _lattice.chernoff_conditional_law(table, n).isf(alpha_share)
    else:
        a = alpha_share * (_poisson_at_mean(n) if route == "penalized" else 1.0)
        s = _lattice.poisson_law(table).isf(a)
    return table.h * (s - _lattice.null_mean(table))


def _signs_balanced(u):
    """Signs +-1 over the bins (in order) splitting ``sum u`` into two halves."""
    cum = np.cumsum(u)
    return np.where(cum - u / 2 < cum[-1] / 2, 1.0, -1.0)


def _eps_for_family(n, P, w, z_thr, z_beta, shape, signs):
    """Smallest visible TV whose family ``delta = eps * c * signs * shape`` the global part detects."""
    base = signs * shape
    base = base - P * base.sum()          # exactly sum-zero (TV changes by << 1%)
    base = base / (0.5 * np.abs(base).sum())  # TV(delta) = eps
    # bins with equal (P, base) contribute equally (w is a function of P): distinct rows, multiplicities
    _, first, inv = np.unique(P, return_index=True, return_inverse=True)
    key = inv.ravel() * 2 + (base > 0)
    cnt = np.bincount(key)
    keep = np.flatnonzero(cnt)
    rep = np.zeros(len(cnt), dtype=np.int64)
    rep[key] = np.arange(len(key))
    Pu, wu, bu, cnt = P[rep[keep]], w[rep[keep]], base[rep[keep]], cnt[keep]

    def power_gap(eps):
        mu = n * Pu
        nu = n * np.maximum(Pu + eps * bu, 0.0)  # Q >= 0: beyond that the family no longer exists
        d = nu - mu
        m = float((cnt * wu * d ** 2 / mu).sum())
        v = float((cnt * wu ** 2 * (2.0 * nu ** 2 + 4.0 * d ** 2 * nu) / mu ** 2).sum())
        return (m - z_thr) / np.sqrt(v) - z_beta

    if power_gap(1.0) < 0:
        return 1.0
    return brent_root(power_gap, 1e-9, 1.0, xtol=1e-7, rtol=1e-7)


@dataclass(frozen=True)
class Detectability:
    """What :func:`identity_test` detects at ``n``: ``min_detectable_tv = hidden_tv + SAFETY x
    max(worst_case_tv, diffuse_tv, concentrated_tv)`` (capped at 1); ``route`` as in the test."""

    n: int
    alpha: float
    power: float
    bins: int
    hidden_tv: float
    worst_case_tv: float
    diffuse_tv: float
    concentrated_tv: float
    min_detectable_tv: float
    route: str
    threshold: float

    def to_dict(self) -> dict:
        return to_builtin({f: getattr(self, f) for f in self.__dataclass_fields__})


#: :func:`_detect`'s answers, the most recently asked last. A run asks the same question again and again (the
#: default verifier battery: 127 tests, 40 distinct questions, since the tallies of one scenario share their bins,
#: sample size and alpha share), and an answer (a frozen Detectability) depends on nothing else (given this module's
#: constants: a test that changes COND_WORK, CHERNOFF_WORK or SAFETY clears it).
_DETECT_MEMO: "OrderedDict[tuple, Detectability]" = OrderedDict()
_DETECT_MEMO_SIZE = 512
_DETECT_LOCK = threading.Lock()


def _detect(pl, n, alpha, power, sampling, conditional):
    """:func:`_detect_uncached`, remembered per (pooled bins, hidden mass, n, alpha, power, sampling, conditional)."""
    probs = pl.bin_probs
    key = (hashlib.blake2b(probs.tobytes(), digest_size=16).digest(), probs.size, float(pl.hidden_mass), int(n),
           float(alpha), float(power), sampling, conditional)  # a digest: pooled laws can have 10^5 bins
    with _DETECT_LOCK:
        hit = _DETECT_MEMO.get(key)
        if hit is not None:
            _DETECT_MEMO.move_to_end(key)
            return hit
    answer = _detect_uncached(pl, n, alpha, power, sampling, conditional)
    with _DETECT_LOCK:
        _DETECT_MEMO[key] = answer
        while len(_DETECT_MEMO) > _DETECT_MEMO_SIZE:
            _DETECT_MEMO.popitem(last=False)
    return answer


def _detect_uncached(pl, n, alpha, power, sampling, conditional):
    B = pl.nbins
    if n <= 0 or B < 2:
        return Detectability(n, alpha, power, B, float(pl.hidden_mass), 1.0, 1.0, 1.0, 1.0, "untestable",
                             float("inf"))
    P = pl.bin_probs
    w = vv_weights(P)
    mu_n = n * P
    table = _lattice.z_table(mu_n, w)
    route = route_for(table, n, sampling, conditional)
    z_thr = _z_threshold(table, n, alpha / 2.0, route)
    z_beta = norm_isf(1.0 - power)
    order = np.argsort(-P, kind="stable")
    Po, wo = P[order], w[order]
    eps_vv = _eps_for_family(n, Po, wo, z_thr, z_beta, Po ** (2.0 / 3.0), _signs_balanced(Po ** (2.0 / 3.0)))
    eps_p = _eps_for_family(n, Po, wo, z_thr, z_beta, Po, _signs_balanced(Po))
    # concentrated: eps from the heaviest bin to the next; max-cell (alpha / 2 over 2B tails) or global
    v = float(Po[0] * (1.0 - Po[0]))
    z_m = norm_isf(alpha / (4.0 * B))
    eps_mc = (z_m + z_beta) * np.sqrt(v / n)
    shape = np.zeros(B)
    shape[0], shape[1] = -1.0, 1.0
    eps_cz = _eps_for_family(n, Po, wo, z_thr, z_beta, np.ones(B), shape)
    eps_c = min(eps_mc, eps_cz)
    visible = max(eps_vv, eps_p, eps_c)
    mdtv = float(min(1.0, pl.hidden_mass + SAFETY * visible))
    return Detectability(n=int(n), alpha=float(alpha), power=float(power), bins=int(B),
                         hidden_tv=float(pl.hidden_mass), worst_case_tv=float(eps_vv), diffuse_tv=float(eps_p),
                         concentrated_tv=float(eps_c), min_detectable_tv=mdtv, route=route, threshold=float(z_thr))


def _plan_iv(probs, support_size, alpha, power, sampling, conditional):
    alpha = _alpha_iv(alpha)
    power = _alpha_iv(power, "power")
    if (probs is None) == (support_size is None):
        raise ValueError("Give exactly one of `probs` (the known law) or `support_size` "
                         "(then a uniform law on that many outcomes is assumed).")
    if probs is not None:
        probs = _probs_iv(probs)
    else:
        support_size = _positive_int_iv(support_size, "support_size", minimum=2)
    if sampling not in SAMPLINGS:
        raise ValueError(f"`sampling` must be one of {SAMPLINGS}; got {sampling!r}.")
    if conditional not in ("auto", True, False):
        raise ValueError(f"`conditional` must be 'auto', True or False; got {conditional!r}.")
    return probs, support_size, alpha, power


def _pooler(probs, support_size, min_expected, max_bins):
    if probs is None:
        probs = np.full(support_size, 1.0 / support_size)
        order = np.arange(support_size)
    else:
        order = sorted_order(probs)
    return lambda n: pool(probs, n, min_expected=min_expected, max_bins=max_bins, order=order)


def detectability(n, *, probs=None, support_size=None, alpha, power=0.99, min_expected=DEFAULT_MIN_EXPECTED,
                  max_bins=DEFAULT_MAX_BINS, sampling="fixed", conditional="auto"):
    """The smallest TV that :func:`identity_test` detects with probability ``power`` at this ``n``,
    with its parts (see the module docstring): the *achieved* detectability of a run of size ``n``.

    Exactly one of ``probs`` / ``support_size`` (uniform law).  ``sampling="poisson"``
    when the sample size was drawn from a Poisson law of mean ``n`` (see
    :func:`identity_test`'s ``poisson_mean``).
    """
    probs, support_size, alpha, power = _plan_iv(probs, support_size, alpha, power, sampling, conditional)
    n = _positive_int_iv(n, "n", minimum=0)
    return _detect(_pooler(probs, support_size, min_expected, max_bins)(n), n, alpha, power, sampling, conditional)


def min_detectable_tv(n, *, probs=None, support_size=None, alpha, power=0.99, min_expected=DEFAULT_MIN_EXPECTED,
                      max_bins=DEFAULT_MAX_BINS, sampling="fixed", conditional="auto"):
    """Smallest TV ``eps`` that :func:`identity_test` detects with the given power at ``n``.

    ``detectability(...).min_detectable_tv``: the pooling's hidden TV plus the worst
    of the least favourable (Valiant-Valiant), diffuse and concentrated deviations,
    each at the test's own threshold (module docstring).  Exactly one of ``probs`` /
    ``support_size`` (uniform law).
    """
    return detectability(n, probs=probs, support_size=support_size, alpha=alpha, power=power,
                         min_expected=min_expected, max_bins=max_bins, sampling=sampling,
                         conditional=conditional).min_detectable_tv


def samples_for(eps, *, probs=None, support_size=None, alpha, power=0.99, min_expected=DEFAULT_MIN_EXPECTED,
                max_bins=DEFAULT_MAX_BINS, sampling="fixed", conditional="auto"):
    """Samples needed for :func:`identity_test` to detect every ``TV >= eps`` of the planned kinds.

    The smallest ``n`` with ``min_detectable_tv(n) <= eps`` (statistics.md section 8),
    by doubling then bisection.  It grows like ``sqrt(B) / eps^2`` for ``B`` equal
    bins (``||P||_{2/3} / eps^2`` in general), and at least until the pooling hides
    less than ``eps``.  Exactly one of ``probs`` / ``support_size`` (uniform law).
    """
    probs, support_size, alpha, power = _plan_iv(probs, support_size, alpha, power, sampling, conditional)
    try:
        eps = float(eps)
    except (TypeError, ValueError):
        raise ValueError(f"`eps` must be a TV distance in (0, 1]; got {eps!r}.") from None
    if not (0 < eps <= 1):
        raise ValueError(f"`eps` must be a TV distance in (0, 1]; got {eps!r}.")
    pooler = _pooler(probs, support_size, min_expected, max_bins)

    def ok(n):
        return _detect(pooler(n), n, alpha, power, sampling, conditional).min_detectable_tv <= eps

    hi = 16
    while not ok(hi):
        hi *= 2
        if hi > 2 ** 40:
            raise ValueError(f"`eps` = {eps} is too small: no sample size up to 2^40 detects it "
                             "(the pooling of a law with too much mass on tiny outcomes may hide it).")
    lo = hi // 2
    while hi - lo > max(1, hi // 2000):
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return int(hi)
