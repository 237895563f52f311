"""Tests of specdec_check.stats.identity_test (calibration, exactness, power, API).

Every statistical assertion states the probability that it fails although the
code is correct; seeds are fixed, so each run is deterministic.
"""
import itertools
import json
import time

import numpy as np
import pytest
from scipy import stats

from specdec_check.stats import (
    IdentityTestResult,
    identity_pvalues,
    identity_test,
    samples_for,
    support_violations,
)
from specdec_check.stats._lattice import g_terms, lattice_law

ALPHAS = (1e-2, 1e-3)


def zipf(k, s=1.0):
    p = np.arange(1, k + 1, dtype=float) ** -s
    return p / p.sum()


def uniform(k):
    return np.full(k, 1.0 / k)


def max_allowed(runs, alpha, level=1e-6):
    """Upper end of a one-sided binomial interval around the nominal rate.

    If the true rejection rate is <= alpha, P(rejections > this) <= ``level`` (1e-6).
    """
    return int(stats.binom.isf(level, runs, alpha))


def canonical_alternatives(p, eps):
    """Concentrated (eps moved top -> second outcome) and diffuse (p(1 +- 2eps) on halves)."""
    o = np.argsort(-p, kind="stable")
    qc = p.copy()
    qc[o[0]] -= eps
    qc[o[1]] += eps
    cum = np.cumsum(p[o])
    sign = np.where(cum - p[o] / 2 < 0.5, 1.0, -1.0)
    qd = p.copy()
    qd[o] = p[o] * (1 + 2 * eps * sign)
    return qc, qd / qd.sum()


class TestIdentityTestCalibration:
    # (probs, n): tiny supports, pooled Zipf with many cells < 1 expected count, no pooling
    CASES = [
        ("uniform2", uniform(2), 10),
        ("uniform3", uniform(3), 30),
        ("zipf64_small_n", zipf(64), 300),
        ("zipf64", zipf(64), 5000),
        ("zipf1000_sparse", zipf(1000, 1.1), 2000),
        ("uniform50", uniform(50), 100_000),
    ]

    @pytest.mark.parametrize("name,probs,n", CASES, ids=[c[0] for c in CASES])
    def test_fixed_n_false_alarm_rate(self, name, probs, n):
        runs = 10_000
        rng = np.random.default_rng(1234)
        pv = identity_pvalues(rng.multinomial(n, probs, size=runs), probs)
        for alpha in ALPHAS:
            rej = int((pv <= alpha).sum())
            # fails with probability <= 1e-6 if the test is valid (see max_allowed)
            assert rej <= max_allowed(runs, alpha), (name, alpha, rej)

    def test_poissonized_false_alarm_rate(self):
        runs, n = 10_000, 200
        probs = zipf(8)
        rng = np.random.default_rng(1234)
        totals = rng.poisson(n, size=runs)
        pv = np.empty(runs)
        for t in np.unique(totals):
            rows = np.flatnonzero(totals == t)
            pv[rows] = identity_pvalues(rng.multinomial(t, probs, size=len(rows)), probs)
        for alpha in ALPHAS:
            # fails with probability <= 1e-6 if the test is valid
            assert (pv <= alpha).sum() <= max_allowed(runs, alpha)

    @pytest.mark.parametrize("k,nmax", [(2, 200), (3, 60), (4, 30)])
    def test_exact_enumeration_extreme_alpha(self, k, nmax):
        """Sum the exact null probability of the rejection region: <= alpha (deterministic)."""
        probs_list = [uniform(k), zipf(k), np.r_[0.9, np.full(k - 1, 0.1 / (k - 1))]]
        for probs in probs_list:
            for n in sorted({1, 2, 5, 10, nmax // 3, nmax}):
                outs = np.array([c for c in itertools.product(range(n + 1), repeat=k - 1) if sum(c) <= n])
                counts = np.c_[outs, n - outs.sum(axis=1)]
                pmf = stats.multinomial.pmf(counts, n, probs)
                pv = identity_pvalues(counts, probs)
                for alpha in (1e-1, 1e-3, 1e-6, 1e-9):
                    size = pmf[pv <= alpha].sum()
                    assert size <= alpha, (k, n, alpha, size)

    def test_lattice_law_matches_brute_force(self):
        """The FFT lattice law equals direct enumeration of two independent Poisson bins."""
        mu = np.array([6.0, 14.0])
        law = lattice_law(mu)
        GRID = law.grid
        N = np.arange(0, 120)
        pm = [stats.poisson.pmf(N, m) for m in mu]
        i0 = np.minimum(np.floor(g_terms(N, mu[0]) / law.h + 0.5), GRID).astype(int)
        i1 = np.minimum(np.floor(g_terms(N, mu[1]) / law.h + 0.5), GRID).astype(int)
        S = np.minimum(i0[:, None] + i1[None, :], GRID)
        P = pm[0][:, None] * pm[1][None, :]
        for s in [1, 50, 100, 200, 400, 800]:
            exact = P[S >= s].sum()
            got = float(law.sf(s))
            assert got >= exact * (1 - 1e-9)
            assert got <= exact * (1 + 1e-6) + 2e-13
        # the observed index is computed from the same table
        assert law.index_of(np.array([3, 20])) == min(i0[3] + i1[20], GRID)

    def test_extreme_alpha_can_still_reject(self):
        probs = zipf(64)
        counts = np.random.default_rng(1234).multinomial(200_000, canonical_alternatives(probs, 0.02)[1])
        r = identity_test(counts, probs, alpha=1e-10)
        assert r.rejected and r.pvalue < 1e-10


class TestIdentityTestPower:
    CASES = [
        ("zipf64", zipf(64), 0.05, 1e-9),
        ("uniform10", uniform(10), 0.05, 1e-9),
        ("zipf1000", zipf(1000, 1.1), 0.05, 1e-6),
        ("uniform2", uniform(2), 0.1, 1e-9),
    ]

    @pytest.mark.parametrize("name,probs,eps,alpha", CASES, ids=[c[0] for c in CASES])
    def test_power_at_samples_for(self, name, probs, eps, alpha):
        n = samples_for(eps, probs=probs, alpha=alpha, power=0.99)
        runs = 300
        rng = np.random.default_rng(1234)
        for q in canonical_alternatives(probs, eps):
            assert 0.5 * np.abs(q - probs).sum() == pytest.approx(eps, rel=0.01)
            pv = identity_pvalues(rng.multinomial(n, q, size=runs), probs)
            misses = int((pv > alpha).sum())
            # measured power must be >= 0.99 (<= 3 misses of 300).  samples_for carries a
            # safety margin (measured: 0 misses everywhere; 0.99 is already reached at
            # ~0.7 n); if the true power is >= 0.999, P(misses >= 4) = binom.sf(3, 300,
            # 1e-3) = 2.6e-4.
            assert misses <= 3, (name, misses)


class TestIdentityTestAPI:
    def test_result_fields_and_json(self):
        probs = zipf(64)
        counts = np.random.default_rng(1234).multinomial(20_000, probs)
        r = identity_test(counts, probs, alpha=1e-6)
        assert isinstance(r, IdentityTestResult)
        assert not r.rejected and 0 < r.pvalue <= 1 and r.n == 20_000 and r.bins == 64
        assert r.tv_plugin == pytest.approx(0.5 * np.abs(counts / 20_000 - probs).sum())
        assert r.tv_plugin < r.tv_upper
        assert 0 < r.tv_null_mean < 0.05 and 0 < r.min_detectable_tv < 1
        assert len(r.worst_cells) == 5
        res = [abs(c["residual"]) for c in r.worst_cells]
        assert res == sorted(res, reverse=True)
        c0 = r.worst_cells[0]
        assert c0["residual"] == pytest.approx((c0["observed"] - c0["expected"]) / np.sqrt(c0["expected"]))
        d = r.to_dict()
        json.dumps(d, allow_nan=False)
        assert d["rejected"] is False and type(d["pvalue"]) is float and type(d["n"]) is int
        with pytest.raises(Exception):
            r.pvalue = 0.5  # frozen

    def test_support_violation(self):
        probs = np.array([0.5, 0.0, 0.5, 0.0])
        counts = np.array([10, 0, 12, 1])
        assert support_violations(counts, probs).tolist() == [3]
        r = identity_test(counts, probs, alpha=1e-9)
        assert r.rejected and r.pvalue == 0.0 and r.support_violations == (3,)
        assert "support" in r.method and "3" in r.method
        json.dumps(r.to_dict(), allow_nan=False)

    def test_zero_prob_cells_without_counts_are_fine(self):
        probs = np.r_[zipf(20), np.zeros(5)]
        probs /= probs.sum()
        counts = np.random.default_rng(1234).multinomial(5000, probs)
        r = identity_test(counts, probs, alpha=1e-9)
        assert not r.rejected and r.support_violations == ()

    def test_n_zero(self):
        r = identity_test(np.zeros(5, dtype=int), uniform(5), alpha=0.01)
        assert r.pvalue == 1.0 and r.n == 0 and not r.rejected
        json.dumps(r.to_dict(), allow_nan=False)

    def test_integral_floats_accepted(self):
        probs = uniform(4)
        a = identity_test(np.array([3.0, 5.0, 4.0, 8.0]), probs, alpha=0.01)
        b = identity_test(np.array([3, 5, 4, 8], dtype=np.uint8), probs, alpha=0.01)
        assert a.pvalue == b.pvalue

    def test_obvious_failure_rejects(self):
        probs = uniform(10)
        counts = np.r_[1000, np.full(9, 10)]
        assert identity_test(counts, probs, alpha=1e-10).rejected

    def test_matches_vectorised_path(self):
        probs = zipf(30)
        counts = np.random.default_rng(1234).multinomial(3000, probs, size=5)
        pv = identity_pvalues(counts, probs)
        for c, p in zip(counts, pv):
            assert identity_test(c, probs, alpha=0.01).pvalue == p

    def test_speed_k64_cached(self):
        probs = zipf(64)
        counts = np.random.default_rng(1234).multinomial(50_000, probs)
        identity_test(counts, probs, alpha=1e-9)
        t = time.perf_counter()
        for _ in range(10):
            identity_test(counts, probs, alpha=1e-9)
        assert (time.perf_counter() - t) / 10 < 0.05

    @pytest.mark.parametrize(
        "counts,probs,alpha,match",
        [
            ([1, 2], [0.5, -0.1, 0.6], 0.01, "nonnegative"),
            ([1, 2], [0.5, np.nan], 0.01, "finite"),
            ([1, 2], [0.5, 0.6], 0.01, "sum to 1"),
            ([1, 2], [0.5, 0.5 + 1e-7], 0.01, "sum to 1"),
            ([1, -2], [0.5, 0.5], 0.01, "nonnegative"),
            ([1, 2.5], [0.5, 0.5], 0.01, "integers"),
            ([1, 2, 3], [0.5, 0.5], 0.01, "same length"),
            ([[1, 2]], [0.5, 0.5], 0.01, "1-dimensional"),
            ([1, 2], [0.5, 0.5], 0.0, "between 0 and 1"),
            ([1, 2], [0.5, 0.5], 1.0, "between 0 and 1"),
            ([1, 2], [0.5, 0.5], "x", "real number"),
            (["a", "b"], [0.5, 0.5], 0.01, "nonnegative integers"),
        ],
    )
    def test_bad_input(self, counts, probs, alpha, match):
        with pytest.raises(ValueError, match=match):
            identity_test(counts, probs, alpha=alpha)

    def test_tolerance_accepts_rounding(self):
        probs = uniform(3) * (1 + 1e-12)
        assert identity_test([3, 3, 4], probs, alpha=0.01).n == 10


class TestIdentityTestSkewedSupport:
    def test_power_when_most_cells_under_one_expected_count(self):
        """Vocabulary-like law (statistics.md 7.4): k=1e4, p ~ i^-1.1, n=2e4, 85% of cells < 1 expected.

        Random-sign diffuse deviation q = p (1 +- 0.1), TV ~ 0.047.  Pooled G alone has
        power ~0.65 here; the Valiant-Valiant-weighted part lifts it to ~0.98 (measured).
        """
        rng = np.random.default_rng(1234)
        k, n, alpha, runs = 10**4, 2 * 10**4, 1e-3, 200
        p = zipf(k, 1.1)
        assert np.mean(n * p < 1) > 0.8
        q = p * (1 + 0.1 * rng.choice([-1.0, 1.0], size=k))
        q /= q.sum()
        pv = identity_pvalues(rng.multinomial(n, q, size=runs), p)
        # if the power is >= 0.95, P(rejections < 180 of 200) = binom.cdf(179, 200, .95) ~ 1e-3
        assert (pv <= alpha).sum() >= 180


class TestLatticeTiltedPass:
    @pytest.mark.parametrize("B,mu0", [(2, 5.0), (64, 5.0), (300, 1e4), (512, 50.0)])
    def test_two_tilts_agree_in_far_tail(self, B, mu0):
        """Tail probabilities 1e-6..1e-15 from two different Esscher tilts agree (deterministic)."""
        import specdec_check.stats._lattice as L

        p = zipf(B)
        mu = mu0 * B * p
        law = L.lattice_law(mu)
        assert np.all(np.isfinite(law.tail1))  # self-check passed
        w = np.ones(B)
        laws, over, *_ = L._bin_laws(mu, law.h, w, law.grid)
        other, _ = L._tree(laws, over, 0.6 * L._tilt(w), law.h, law.grid)
        sel = (law.tail1 < 1e-6) & (law.tail1 > 1e-15) & (np.arange(law.grid + 1) > 0)
        assert sel.any()
        np.testing.assert_allclose(other[sel], law.tail1[sel], rtol=1e-8)


class TestIdentityTestPoissonizedFlag:
    def test_flag_only_recorded(self):
        probs = zipf(16)
        counts = np.random.default_rng(1234).multinomial(4000, probs)
        a = identity_test(counts, probs, alpha=1e-6)
        b = identity_test(counts, probs, alpha=1e-6, poissonized=True)
        assert a.pvalue == b.pvalue and "Poissonized" in b.method and "fixed-n" in a.method
