"""Tests of tv_distance, expected_null_tv, tv_upper_bound."""
import itertools

import numpy as np
import pytest
from scipy import stats

from specdec_check.stats import expected_null_tv, tv_deviation_radius, tv_distance, tv_plugin_radius, tv_upper_bound


def categorical_counts(rng, n, q, runs):
    cdf = np.cumsum(q)
    out = np.empty((runs, len(q)), dtype=np.int64)
    for r in range(runs):
        x = np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right"), len(q) - 1)
        out[r] = np.bincount(x, minlength=len(q))
    return out


class TestTvDistance:
    def test_values(self):
        assert tv_distance([5, 5], [0.5, 0.5]) == 0.0
        assert tv_distance([10, 0], [0.5, 0.5]) == pytest.approx(0.5)
        assert tv_distance([0, 0], [0.5, 0.5]) == 0.0

    def test_bad_input(self):
        with pytest.raises(ValueError, match="sum to 1"):
            tv_distance([1, 1], [0.5, 0.4])


class TestExpectedNullTv:
    def test_matches_enumeration(self):
        for probs, n in [(np.array([0.2, 0.3, 0.5]), 7), (np.array([0.01, 0.99]), 25), (np.array([0.25] * 4), 6)]:
            k = len(probs)
            outs = np.array([c for c in itertools.product(range(n + 1), repeat=k - 1) if sum(c) <= n])
            counts = np.c_[outs, n - outs.sum(axis=1)]
            pmf = stats.multinomial.pmf(counts, n, probs)
            exact = (pmf * 0.5 * np.abs(counts / n - probs).sum(axis=1)).sum()
            assert expected_null_tv(probs, n) == pytest.approx(exact, rel=1e-10)

    def test_large_and_fast(self):
        k = 10**6
        p = np.arange(1, k + 1) ** -1.1
        p /= p.sum()
        v = expected_null_tv(p, 10**7)
        assert 0 < v < 0.5
        assert expected_null_tv(p, 0) == 0.0


class TestTvUpperBound:
    def test_coverage(self):
        """TV(q, p) <= bound in >= 1 - delta of runs, for a q != p."""
        rng = np.random.default_rng(1234)
        k, n, delta, runs = 20, 500, 0.05, 4000
        p = np.full(k, 1 / k)
        q = rng.dirichlet(np.ones(k))
        true_tv = 0.5 * np.abs(q - p).sum()
        counts = rng.multinomial(n, q, size=runs)
        fails = sum(tv_upper_bound(c, p, delta=delta) < true_tv for c in counts)
        # bounds are conservative: P(fails > binom.isf(1e-6, runs, delta)) <= 1e-6
        assert fails <= stats.binom.isf(1e-6, runs, delta)

    def test_radius_is_min_of_weissman_and_mcdiarmid(self):
        n, k, d = 10**6, 1000, 1e-3
        w = np.sqrt((k * np.log(2) + np.log(1 / d)) / (2 * n))
        m = 0.5 * np.sqrt((k - 1) / n) + np.sqrt(np.log(1 / d) / (2 * n))
        assert tv_deviation_radius(n, k, d) == pytest.approx(min(w, m), rel=1e-6)
        assert tv_deviation_radius(n, k, d) == pytest.approx(0.0177, abs=2e-4)  # statistics.md 2.3

    @pytest.mark.parametrize("case", ["heavy_plus_tiny", "uniform_1e4", "dirichlet_20"])
    def test_coverage_of_both_radii(self, case):
        """TV(q, p) <= plug-in + radius in >= 1 - delta of runs, for each radius alone (delta = 0.05)."""
        rng = np.random.default_rng(1234)
        delta, runs = 0.05, 1000
        if case == "heavy_plus_tiny":  # sampler misses the tiny tail's shape; true TV 0.03
            p = np.r_[0.5, 0.3, 0.17, np.full(10_000, 0.03 / 10_000)]
            q = np.r_[0.5, 0.3, 0.2, np.zeros(10_000)]
            n = 2000
        elif case == "uniform_1e4":  # issue 19: true TV 0.1
            k = 10_000
            p = np.full(k, 1 / k)
            q = p * (1 + 0.2 * rng.choice([-1.0, 1.0], size=k))
            q /= q.sum()
            n = 20_000
        else:
            p = np.full(20, 1 / 20)
            q = rng.dirichlet(np.ones(20))
            n = 300
        true_tv = 0.5 * np.abs(q - p).sum()
        counts = categorical_counts(rng, n, q, runs)
        plug = 0.5 * np.abs(counts / n - p).sum(axis=1)
        for radius in (tv_plugin_radius(n, delta), tv_deviation_radius(n, len(p), delta)):
            fails = int((plug + radius < true_tv).sum())
            # bounds are valid: P(fails > binom.isf(1e-6, runs, delta)) <= 1e-6
            assert fails <= stats.binom.isf(1e-6, runs, delta), (case, radius, fails)
        assert np.median(np.minimum(1, plug + tv_plugin_radius(n, delta))) < 0.5  # informative, unlike 1.0

    def test_plugin_radius_never_larger(self):
        for n in (1, 10, 2000, 10 ** 6):
            for k in (2, 10, 10 ** 4):
                for d in (0.5, 1e-3, 1e-12):
                    assert tv_plugin_radius(n, d) <= tv_deviation_radius(n, k, d) + 1e-15
        assert tv_plugin_radius(2000, 0.05) == pytest.approx(np.sqrt(np.log(20) / 4000))

    def test_bad_delta(self):
        with pytest.raises(ValueError, match="delta"):
            tv_upper_bound([1, 1], [0.5, 0.5], delta=0)


# --------------------------------------------------------------------------- properties over drawn laws
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specdec_check.strategies import probability_vectors  # noqa: E402


@settings(max_examples=30)
@given(probs=probability_vectors(min_vocab=2, max_vocab=4), n=st.integers(1, 12))
def test_expected_null_tv_is_the_enumerated_mean_for_any_law(probs, n):
    """``E TV(q_hat, p)`` of n draws from any drawn law, against the multinomial enumeration."""
    k = len(probs)
    outs = np.array([c for c in itertools.product(range(n + 1), repeat=k - 1) if sum(c) <= n])
    counts = np.c_[outs, n - outs.sum(axis=1)]
    pmf = stats.multinomial.pmf(counts, n, probs)
    exact = (pmf * 0.5 * np.abs(counts / n - probs).sum(axis=1)).sum()
    assert expected_null_tv(probs, n) == pytest.approx(exact, rel=1e-9, abs=1e-15)
