"""Tests of SequentialIdentityTest (anytime validity, early stopping)."""
import json

import numpy as np
import pytest
from scipy import special, stats

from specdec_check.stats import SequentialIdentityTest, samples_for
from specdec_check.stats._sequential import DEFAULT_CONCENTRATIONS, dm_log_evalues


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
