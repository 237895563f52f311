"""Tests of randomized_pit / pit_test."""
import json

import numpy as np
import pytest
from scipy import stats

from specdec_check.stats import UniformityTestResult, identity_pvalues, pit_test, randomized_pit


def draw(rows, rng):
    """One categorical draw per row (inverse CDF)."""
    u = rng.random(len(rows))
    return np.minimum((u[:, None] > np.cumsum(rows, axis=1)).sum(axis=1), rows.shape[1] - 1)


class TestRandomizedPit:
    def test_exactly_uniform_under_null(self):
        rng = np.random.default_rng(1234)
        table = rng.dirichlet(np.full(6, 0.3), size=50)
        table[:, 0] = 0
        table /= table.sum(axis=1, keepdims=True)
        idx = rng.integers(0, 50, 20_000)
        x = draw(table[idx], rng)
        u = randomized_pit(x, table, rng=rng, row_index=idx)
        assert np.all((u >= 0) & (u < 1))
        # KS test at 1e-6: fails with probability 1e-6 if the PIT is exact
        assert stats.kstest(u, "uniform").pvalue > 1e-6
        u2 = randomized_pit(x, table[idx], rng=np.random.default_rng(7))
        assert stats.kstest(u2, "uniform").pvalue > 1e-6

    def test_deterministic_given_seed(self):
        P = np.array([[0.5, 0.5], [0.2, 0.8]])
        a = randomized_pit([0, 1], P, rng=3)
        b = randomized_pit([0, 1], P, rng=np.random.default_rng(3))
        assert np.array_equal(a, b)
        assert a[0] < 0.5 and a[1] >= 0.2

    def test_support_violation_raises(self):
        with pytest.raises(ValueError, match="sample 1 is outcome 0"):
            randomized_pit([1, 0], np.array([[0.5, 0.5], [0.0, 1.0]]), rng=1)

    @pytest.mark.parametrize("x,P,kw,match", [
        ([0, 3], [[0.5, 0.5], [0.5, 0.5]], {}, "outside the vocabulary"),
        ([0], [[0.5, 0.5], [0.5, 0.5]], {}, "row_index"),
        ([0, 1], [[0.5, 0.6], [0.5, 0.5]], {}, "sum to 1"),
        ([0, 1], [[0.5, 0.5]], {"row_index": [0, 2]}, "row_index"),
        ([0.5], [[0.5, 0.5]], {}, "integer"),
    ])
    def test_bad_input(self, x, P, kw, match):
        with pytest.raises(ValueError, match=match):
            randomized_pit(x, P, rng=1, **kw)
        with pytest.raises(ValueError, match="rng"):
            randomized_pit([0], [[0.5, 0.5]], rng=None)


class TestPitTest:
    def test_calibration(self):
        """10^4 null runs of n=400 samples, V=5: PIT -> 20 bins -> identity test (same path as pit_test)."""
        rng = np.random.default_rng(1234)
        runs, n, bins = 10_000, 400, 20
        table = rng.dirichlet(np.ones(5), size=30)
        idx = rng.integers(0, 30, runs * n)
        x = draw(table[idx], rng)
        u = randomized_pit(x, table, rng=rng, row_index=idx).reshape(runs, n)
        counts = np.stack([np.bincount(np.minimum((r * bins).astype(int), bins - 1), minlength=bins) for r in u])
        pv = identity_pvalues(counts, np.full(bins, 1 / bins))
        for alpha in (1e-2, 1e-3):
            # P(failure | valid) <= 1e-6
            assert (pv <= alpha).sum() <= stats.binom.isf(1e-6, runs, alpha)
        # pit_test is this pipeline
        r = pit_test(x[:n], table, alpha=0.01, rng=np.random.default_rng(5), row_index=idx[:n], bins=bins)
        assert isinstance(r, UniformityTestResult) and r.bins == bins and r.n == n and 0 <= r.pvalue <= 1

    def test_detects_wrong_sampler(self):
        rng = np.random.default_rng(1234)
        table = rng.dirichlet(np.ones(8), size=100)
        idx = rng.integers(0, 100, 20_000)
        wrong = table[idx] ** 1.5
        wrong /= wrong.sum(axis=1, keepdims=True)  # temperature bug
        x = draw(wrong, rng)
        r = pit_test(x, table, alpha=1e-9, rng=rng, row_index=idx)
        assert r.rejected
        assert not pit_test(draw(table[idx], rng), table, alpha=1e-9, rng=rng, row_index=idx).rejected

    def test_reports_support_violations(self):
        P = np.array([[0.5, 0.5, 0.0], [0.2, 0.0, 0.8]])
        r = pit_test([0, 2, 1, 1], P, alpha=1e-6, rng=1, row_index=[0, 0, 1, 0])
        assert r.rejected and r.pvalue == 0.0
        assert r.support_violations == ((1, 2), (2, 1))
        json.dumps(r.to_dict(), allow_nan=False)

    def test_default_bins(self):
        P = np.full((1, 4), 0.25)
        r = pit_test(np.zeros(1000, dtype=int), P, alpha=0.01, rng=1, row_index=np.zeros(1000, dtype=int))
        assert r.bins == int(2 * 1000**0.4)
        json.dumps(r.to_dict(), allow_nan=False)


class TestPitInputPrecision:
    def test_float32_rows_accepted_float64_strict(self):
        rng = np.random.default_rng(1234)
        rows = rng.dirichlet(np.ones(50), size=10).astype(np.float32)
        x = np.zeros(10, dtype=int)
        u = randomized_pit(x, rows, rng=1)  # float32 round-off in the row sums is tolerated
        assert u.shape == (10,)
        with pytest.raises(ValueError, match="sum to 1"):
            randomized_pit(x, rows.astype(np.float64) * (1 + 1e-7), rng=1)
