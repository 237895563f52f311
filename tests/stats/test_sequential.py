"""Tests of SequentialIdentityTest (anytime validity, early stopping)."""
import json

import numpy as np
import pytest
from scipy import special, stats

from specdec_check.stats import SequentialIdentityTest, samples_for
from specdec_check.stats._sequential import DEFAULT_CONCENTRATIONS, concentrations_for, dm_log_evalues


def zipf(k):
    p = 1 / np.arange(1, k + 1)
    return p / p.sum()


class TestSequentialIdentityTest:
    def test_type_one_error_under_continuous_monitoring(self):
        """2000 null runs, e-value checked after every batch of 10 up to n = 5000: P(ever reject) <= alpha."""
        rng = np.random.default_rng(1234)
        probs = zipf(8)
        runs, batch, looks, alpha = 2000, 10, 500, 0.05
        st = SequentialIdentityTest(probs, alpha=alpha)
        assert st.result().bins == 8
        cum = np.zeros((runs, 8))
        ever = np.zeros(runs, dtype=bool)
        A = np.asarray(DEFAULT_CONCENTRATIONS)
        for _ in range(looks):
            cum += rng.multinomial(batch, probs, size=runs)
            le = special.logsumexp(dm_log_evalues(cum, probs, A), axis=-1) - np.log(len(A))
            ever |= le >= np.log(1 / alpha)
        # P(failure | anytime-valid) <= 1e-6
        assert ever.sum() <= stats.binom.isf(1e-6, runs, alpha)

    def test_class_matches_vectorised(self):
        rng = np.random.default_rng(1234)
        probs = zipf(8)
        st = SequentialIdentityTest(probs, alpha=0.05)
        cum = np.zeros(8)
        for _ in range(5):
            c = rng.multinomial(30, probs)
            cum += c
            st.update(c)
        A = np.asarray(DEFAULT_CONCENTRATIONS)
        le = special.logsumexp(dm_log_evalues(cum, probs, A)) - np.log(len(A))
        assert st.result().statistic == pytest.approx(le)
        assert st.e_value == pytest.approx(np.exp(le)) and st.n == 150

    def test_stops_five_times_earlier_than_fixed_n(self):
        rng = np.random.default_rng(1234)
        probs = zipf(64)
        alpha, eps = 1e-6, 0.02
        n_fixed = samples_for(eps, probs=probs, alpha=alpha)
        o = np.argsort(-probs, kind="stable")
        sign = np.where(np.cumsum(probs[o]) - probs[o] / 2 < 0.5, 1.0, -1.0)
        q = probs.copy()
        q[o] = probs[o] * (1 + 2 * 5 * eps * sign)
        q /= q.sum()
        assert 0.5 * np.abs(q - probs).sum() == pytest.approx(5 * eps, rel=0.02)
        stops = []
        for _ in range(100):
            st = SequentialIdentityTest(probs, alpha=alpha)
            while not st.rejected and st.n < n_fixed:
                st.update(rng.multinomial(50, q))
            stops.append(st.n)
        # measured median ratio ~60; the runs are deterministic given the seed
        assert np.median(stops) * 5 <= n_fixed
        assert np.mean(np.array(stops) < n_fixed) >= 0.99

    def test_type_one_error_many_bins(self):
        """300 equal bins (the grid then reaches A = 3e6): 1000 null runs watched after every batch."""
        rng = np.random.default_rng(1234)
        k, runs, batch, looks, alpha = 300, 1000, 100, 30, 0.05
        probs = np.full(k, 1 / k)
        A = np.asarray(concentrations_for(k))
        assert A.max() == pytest.approx(3e6) and SequentialIdentityTest(probs, alpha=alpha).bins == k
        cum = np.zeros((runs, k))
        ever = np.zeros(runs, dtype=bool)
        for _ in range(looks):
            cum += rng.multinomial(batch, probs, size=runs)
            le = special.logsumexp(dm_log_evalues(cum, probs, A), axis=-1) - np.log(len(A))
            ever |= le >= np.log(1 / alpha)
        # P(failure | anytime-valid) <= 1e-6
        assert ever.sum() <= stats.binom.isf(1e-6, runs, alpha)

    def test_incremental_update_matches_closed_form(self):
        rng = np.random.default_rng(1234)
        k = 5000
        probs = rng.dirichlet(np.full(k, 0.5))
        probs[probs < 1e-7] = 0
        probs /= probs.sum()
        st = SequentialIdentityTest(probs, alpha=1e-6, min_mass=1e-12)
        assert st.bins == np.count_nonzero(probs)
        cum = np.zeros(k)
        for m in (10, 300, 5000, 20000):
            c = rng.multinomial(m, probs)
            cum += c
            st.update(c)
        pos = probs > 0
        A = np.asarray(concentrations_for(st.bins))
        order = np.argsort(-probs[pos], kind="stable")
        le = special.logsumexp(dm_log_evalues(cum[pos][order], probs[pos][order], A)) - np.log(len(A))
        assert st.result().statistic == pytest.approx(le, rel=1e-9, abs=1e-6)

    def test_no_bin_cap_detects_random_signs(self):
        """Issue 19: uniform 10^4, random signs (TV 0.05).  Pooled to 256 bins the signs cancel; unpooled,
        the e-process (alpha 5e-4, looks at every 1/8 growth as the checker does) stops early.
        Measured: 20/20 by a median n of 70k (the fixed-n plan is 102k); with the old cap 10/20 by 400k."""
        rng = np.random.default_rng(1234)
        k = 10 ** 4
        p = np.full(k, 1 / k)
        q = p * (1 + 0.1 * rng.choice([-1.0, 1.0], size=k))
        q /= q.sum()
        rejected = 0
        for _ in range(20):
            st = SequentialIdentityTest(p, alpha=5e-4)
            while not st.rejected and st.n < 200_000:
                st.update(rng.multinomial(max(256, st.n // 8), q))
            rejected += st.rejected
        assert rejected >= 18

    def test_n_max_uses_the_fixed_n_bins(self):
        probs = np.arange(1, 1001.0) ** -1.1
        probs /= probs.sum()
        st = SequentialIdentityTest(probs, alpha=1e-3, n_max=2000)
        from specdec_check.stats._pooling import pool
        assert st.bins == pool(probs, 2000).nbins < 1000
        assert SequentialIdentityTest(probs, alpha=1e-3, max_bins=64).bins <= 64

    def test_support_violation_rejects_immediately(self):
        st = SequentialIdentityTest([0.5, 0.5, 0.0], alpha=1e-9)
        st.update([3, 4, 0])
        assert not st.rejected
        st.update([0, 0, 1])
        r = st.result()
        assert st.rejected and r.rejected and r.support_violations == (2,) and "support" in r.method
        json.dumps(r.to_dict(), allow_nan=False)

    def test_result_json(self):
        st = SequentialIdentityTest(zipf(10), alpha=1e-3).update(np.ones(10, dtype=int))
        d = st.result().to_dict()
        json.dumps(d, allow_nan=False)
        assert d["n"] == 10 and 0 < d["pvalue"] <= 1

    def test_bad_input(self):
        with pytest.raises(ValueError, match="alpha"):
            SequentialIdentityTest([0.5, 0.5], alpha=0)
        with pytest.raises(ValueError, match="concentrations"):
            SequentialIdentityTest([0.5, 0.5], alpha=0.1, concentrations=[-1.0])
        with pytest.raises(ValueError, match="same length"):
            SequentialIdentityTest([0.5, 0.5], alpha=0.1).update([1, 2, 3])
        with pytest.raises(ValueError, match="min_mass"):
            SequentialIdentityTest([0.5, 0.5], alpha=0.1, min_mass=0)
        with pytest.raises(ValueError, match="n_max"):
            SequentialIdentityTest([0.5, 0.5], alpha=0.1, n_max=-3)


def test_min_tv_extends_the_grid_and_keeps_power_down_to_the_target():
    # Issue 21 (--tv 1e-3): the default grid reaches eps ~ 0.005 on 64 bins; min_tv adds concentrations up to
    # B / (4 min_tv^2) = 1.6e7, and leaves the named modes' grids (design TV >= 0.02) as they were.
    assert concentrations_for(64, 0.02) == DEFAULT_CONCENTRATIONS == concentrations_for(64)
    grid = concentrations_for(64, 1e-3)
    assert max(grid) == pytest.approx(1.6e7) and min(grid) == 10.0 and len(grid) > len(DEFAULT_CONCENTRATIONS)
    with pytest.raises(ValueError, match="min_tv"):
        concentrations_for(64, 0.0)
    # A deviation of TV 2e-3 on 64 equal bins, seen in batches of 2^18 (one shard each), seeded: the extended
    # grid rejects after 21 batches, the default one after 31 (measured).
    probs = np.full(64, 1 / 64)
    tilted = probs + np.where(np.arange(64) < 32, 1, -1) * 2e-3 / 32
    looks = {}
    for min_tv in (None, 1e-3):
        rng, test = np.random.default_rng(0), SequentialIdentityTest(probs, alpha=1e-8, min_tv=min_tv)
        for batch in range(1, 61):
            if test.update(rng.multinomial(1 << 18, tilted)).rejected:
                break
        looks[min_tv] = batch
    assert looks[1e-3] < 0.8 * looks[None] and looks[None] < 60, looks
