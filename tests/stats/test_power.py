"""Tests of samples_for / min_detectable_tv (power is simulated in test_identity.py)."""
import numpy as np
import pytest

from specdec_check.stats import min_detectable_tv, samples_for


class TestSamplesFor:
    def test_inverse_of_min_detectable_tv(self):
        p = np.arange(1, 65.0) ** -1
        p /= p.sum()
        for eps in (0.02, 0.05, 0.1):
            n = samples_for(eps, probs=p, alpha=1e-9)
            assert min_detectable_tv(n, probs=p, alpha=1e-9) <= eps
            assert min_detectable_tv(int(n * 0.99), probs=p, alpha=1e-9) > eps * 0.999

    def test_monotone(self):
        a = samples_for(0.05, support_size=64, alpha=1e-6)
        b = samples_for(0.05, support_size=64, alpha=1e-10)
        c = samples_for(0.02, support_size=64, alpha=1e-10)
        assert a < b < c
        # same order of magnitude as statistics.md section 5 (16k at eps .05, 1e-10, k=64)
        assert 10_000 < b < 40_000

    def test_large_support(self):
        assert samples_for(0.05, support_size=10**6, alpha=1e-10) > 0

    @pytest.mark.parametrize("kw,match", [({}, "exactly one"), ({"probs": [0.5, 0.5], "support_size": 2}, "exactly one"),
                                          ({"support_size": 1}, "support_size"), ({"support_size": 5, "power": 1.0}, "power")])
    def test_bad_input(self, kw, match):
        with pytest.raises(ValueError, match=match):
            samples_for(0.1, alpha=0.01, **kw)
        with pytest.raises(ValueError, match="eps"):
            samples_for(0.0, support_size=5, alpha=0.01)
        with pytest.raises(ValueError, match="n"):
            min_detectable_tv(-1, support_size=5, alpha=0.01)
