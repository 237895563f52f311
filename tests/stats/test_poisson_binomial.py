"""Tests of poisson_binomial_test / poisson_binomial_pmf (exactness, calibration, API)."""
import itertools
import json

import numpy as np
import pytest
from scipy import stats

from specdec_check.stats import PoissonBinomialResult, poisson_binomial_pmf, poisson_binomial_test


def brute_pmf(p):
    m = len(p)
    pmf = np.zeros(m + 1)
    for bits in itertools.product([0, 1], repeat=m):
        b = np.array(bits)
        pmf[b.sum()] += np.prod(np.where(b, p, 1 - p))
    return pmf


def dp_pmf(p):
    pmf = np.zeros(len(p) + 1)
    pmf[0] = 1.0
    for j, pj in enumerate(p):
        pmf[1 : j + 2] = pmf[1 : j + 2] * (1 - pj) + pmf[: j + 1] * pj
        pmf[0] *= 1 - pj
    return pmf


class TestPoissonBinomialPmf:
    def test_matches_brute_force(self):
        p = np.random.default_rng(1234).random(12)
        np.testing.assert_allclose(poisson_binomial_pmf(p), brute_pmf(p), rtol=1e-12, atol=1e-300)

    def test_fft_tree_matches_recursion(self):
        p = np.random.default_rng(1234).random(1000) ** 3
        got, dropped, used_fft = poisson_binomial_pmf(p, return_bound=True)
        assert used_fft and dropped < 1e-30
        exact = dp_pmf(p)
        assert np.max(np.abs(got - exact)) < 1e-14
        # tails accurate where they matter for p-values down to 1e-10
        big = exact > 1e-11
        np.testing.assert_allclose(got[big], exact[big], rtol=1e-3)

    def test_windowed_large_matches_binomial(self):
        n = 200_000
        pmf, dropped, _ = poisson_binomial_pmf(np.full(n, 0.37), return_bound=True)
        assert dropped < 1e-30
        ref = stats.binom.pmf(np.arange(n + 1), n, 0.37)
        assert np.max(np.abs(pmf - ref)) < 1e-14
        big = ref > 1e-12
        np.testing.assert_allclose(pmf[big], ref[big], rtol=1e-2)

    def test_binomial_special_case(self):
        pmf = poisson_binomial_pmf(np.full(500, 0.3))
        assert np.max(np.abs(pmf - stats.binom.pmf(np.arange(501), 500, 0.3))) < 1e-14

    def test_degenerate(self):
        assert poisson_binomial_pmf(np.array([])).tolist() == [1.0]
        pmf = poisson_binomial_pmf(np.array([1.0, 0.0, 1.0]))
        assert pmf.tolist() == [0.0, 0.0, 1.0, 0.0]


class TestPoissonBinomialTest:
    def test_calibration(self):
        rng = np.random.default_rng(1234)
        p = rng.random(80) ** 2
        runs = 10_000
        s = (rng.random((runs, len(p))) < p).sum(axis=1)
        pv = {v: poisson_binomial_test(v, p, alpha=0.01).pvalue for v in np.unique(s)}
        pvals = np.array([pv[v] for v in s])
        for alpha in (1e-2, 1e-3):
            # P(failure | valid test) <= 1e-6
            assert (pvals <= alpha).sum() <= stats.binom.isf(1e-6, runs, alpha)

    def test_exact_size_at_extreme_alpha(self):
        p = np.random.default_rng(1234).random(200)
        pmf = dp_pmf(p)
        for alt in ("two-sided", "greater", "less"):
            for alpha in (1e-3, 1e-6, 1e-9):
                rej = [s for s in range(201) if poisson_binomial_test(s, p, alpha=alpha, alternative=alt).rejected]
                assert pmf[rej].sum() <= alpha
                assert len(rej) > 0

    def test_pvalues_against_brute_force(self):
        p = np.random.default_rng(1234).random(10)
        pmf = brute_pmf(p)
        for s in range(11):
            assert poisson_binomial_test(s, p, alpha=0.05, alternative="greater").pvalue == pytest.approx(pmf[s:].sum())
            assert poisson_binomial_test(s, p, alpha=0.05, alternative="less").pvalue == pytest.approx(pmf[: s + 1].sum())
            two = pmf[pmf <= pmf[s] * (1 + 1e-7)].sum()
            assert poisson_binomial_test(s, p, alpha=0.05).pvalue == pytest.approx(min(1.0, two))

    def test_large_and_powerful(self):
        """10^6 trials (its time is measured by benchmarks/bench_stats.py, not asserted here)."""
        p = np.random.default_rng(1234).random(10**6)
        r = poisson_binomial_test(int(p.sum()), p, alpha=1e-9)
        assert not r.rejected and r.n == 10**6
        r = poisson_binomial_test(int(p.sum()) + 5000, p, alpha=1e-9)  # ~12 sd away
        assert r.rejected

    def test_result(self):
        r = poisson_binomial_test(3, [0.1, 0.2, 0.9], alpha=0.05)
        assert isinstance(r, PoissonBinomialResult) and r.statistic == 3 and r.expected == pytest.approx(1.2)
        d = r.to_dict()
        json.dumps(d, allow_nan=False)
        assert d["rejected"] == r.rejected

    @pytest.mark.parametrize(
        "s,p,kw,match",
        [
            (1, [0.5, 1.5], {}, "probabilities"),
            (3, [0.5, 0.5], {}, "between 0"),
            (1.5, [0.5, 0.5], {}, "integer"),
            (1, [0.5, 0.5], {"alternative": "bigger"}, "alternative"),
            (1, [[0.5]], {}, "1-dimensional"),
        ],
    )
    def test_bad_input(self, s, p, kw, match):
        with pytest.raises(ValueError, match=match):
            poisson_binomial_test(s, p, alpha=0.01, **kw)
        with pytest.raises(ValueError, match="alpha"):
            poisson_binomial_test(1, [0.5, 0.5], alpha=2)


# --- repeats: independent copies of each Bernoulli ----------------------------------------------

@pytest.mark.parametrize("n, copies", [(7, 3), (300, 5), (5000, 16)])
def test_repeats_equal_the_tiled_probabilities(n, copies):
    p = np.random.default_rng(n).random(n)
    tiled = poisson_binomial_pmf(np.tile(p, copies))
    repeated = poisson_binomial_pmf(p, repeats=copies)
    assert repeated.size == n * copies + 1
    np.testing.assert_allclose(repeated, tiled, rtol=0, atol=1e-14)


def test_per_probability_repeats_equal_np_repeat_and_small_cases_are_exact():
    rng = np.random.default_rng(11)
    p = rng.random(400)
    reps = rng.integers(1, 5, size=p.size)
    np.testing.assert_allclose(poisson_binomial_pmf(p, repeats=reps), poisson_binomial_pmf(np.repeat(p, reps)),
                               rtol=0, atol=1e-14)
    small = np.array([0.2, 0.7, 0.4])
    np.testing.assert_allclose(poisson_binomial_pmf(small, repeats=[1, 2, 3]), dp_pmf(np.repeat(small, [1, 2, 3])),
                               rtol=0, atol=1e-15)


def test_test_with_repeats_matches_the_tiled_test():
    p = np.random.default_rng(2).random(20_000)
    s = int(10 * p.sum()) + 250
    tiled = poisson_binomial_test(s, np.tile(p, 10), alpha=1e-6)
    repeated = poisson_binomial_test(s, p, alpha=1e-6, repeats=10)
    assert repeated.n == tiled.n == 200_000
    assert repeated.expected == pytest.approx(tiled.expected, rel=1e-12)
    assert repeated.pvalue == pytest.approx(tiled.pvalue, rel=1e-9, abs=1e-13)


@pytest.mark.parametrize("repeats, match", [(0, "repeats"), (1.5, "repeats"), ([1, 2], "repeats"), ([[1]], "repeats")])
def test_bad_repeats_are_value_errors(repeats, match):
    with pytest.raises(ValueError, match=match):
        poisson_binomial_test(1, [0.5, 0.5, 0.5], alpha=0.01, repeats=repeats)


def test_successes_are_bounded_by_the_repeated_trials():
    assert poisson_binomial_test(6, [0.5, 0.5], alpha=0.01, repeats=3).n == 6
    with pytest.raises(ValueError, match="number of trials 6"):
        poisson_binomial_test(7, [0.5, 0.5], alpha=0.01, repeats=3)


# --------------------------------------------------------------------------- properties over drawn trials
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TRIAL_PROBS = st.lists(st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0)), min_size=1, max_size=9)


@settings(max_examples=60)
@given(p=_TRIAL_PROBS)
def test_pmf_is_the_enumerated_law_for_any_trials(p):
    p = np.array(p)
    np.testing.assert_allclose(poisson_binomial_pmf(p), brute_pmf(p), atol=1e-12)


@settings(max_examples=60)
@given(p=_TRIAL_PROBS, alternative=st.sampled_from(["greater", "less"]), alpha=st.sampled_from([0.1, 1e-3, 1e-9]))
def test_one_sided_size_is_at_most_alpha_for_any_trials(p, alternative, alpha):
    """Exact size: the null probability of the rejection region of a one-sided test is <= alpha."""
    p = np.array(p)
    pmf = brute_pmf(p)
    rejected = [poisson_binomial_test(s, p, alpha=alpha, alternative=alternative).rejected for s in range(p.size + 1)]
    assert pmf[np.array(rejected)].sum() <= alpha * (1 + 1e-9)


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_rejected_exactly_when_the_pvalue_is_at_most_alpha(alternative):
    """The size guarantee P(p <= alpha) <= alpha needs the boundary included: alpha equal to the p-value
    rejects, the next float below does not (shared by every result type through TestResultMixin)."""
    p = np.array([0.1, 0.2, 0.9, 0.5, 0.3])
    for s in range(p.size + 1):
        pvalue = poisson_binomial_test(s, p, alpha=0.5, alternative=alternative).pvalue
        if not 0 < pvalue < 1:
            continue
        assert poisson_binomial_test(s, p, alpha=pvalue, alternative=alternative).rejected
        assert not poisson_binomial_test(s, p, alpha=np.nextafter(pvalue, 0), alternative=alternative).rejected
