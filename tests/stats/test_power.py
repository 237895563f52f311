"""Tests of samples_for / min_detectable_tv / detectability (power is simulated in test_identity.py
and measured at scale in benchmarks/bench_power.py)."""
import numpy as np
import pytest

from specdec_check.stats import detectability, min_detectable_tv, samples_for
from specdec_check.stats._power import SAFETY


def zipf(k, s=1.0):
    p = np.arange(1, k + 1, dtype=float) ** -s
    return p / p.sum()


class TestSamplesFor:
    def test_inverse_of_min_detectable_tv(self):
        p = zipf(64)
        for eps in (0.05, 0.1):
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

    def test_sqrt_k_rate_at_large_support(self):
        """Equal bins: n grows like sqrt(k) once k is large (the identity-testing rate), with no cap
        (the old engine pooled to 512 bins and promised ~33k samples at k = 10^4, eps 0.05)."""
        n3, n4, n5 = (samples_for(0.05, support_size=k, alpha=1e-6) for k in (10 ** 3, 10 ** 4, 10 ** 5))
        assert 2.6 < n4 / n3 < 3.6 and 2.8 < n5 / n4 < 3.4  # sqrt(10) = 3.16
        assert n4 > 100_000

    def test_hidden_mass_counts(self):
        """Pooling 4 equal cells per bin hides 3/4 of the mass: nothing below TV 0.75 is promised."""
        d = detectability(2500, support_size=10 ** 4, alpha=1e-3)
        assert d.bins == 2500 and d.hidden_tv == pytest.approx(0.75)
        assert d.min_detectable_tv >= 0.75
        e = detectability(200_000, support_size=10 ** 4, alpha=1e-3)
        assert e.hidden_tv == 0 and e.min_detectable_tv < 0.05

    def test_parts_add_up(self):
        d = detectability(30_000, probs=zipf(1000, 1.1), alpha=1e-6)
        parts = max(d.worst_case_tv, d.diffuse_tv, d.concentrated_tv)
        assert d.min_detectable_tv == pytest.approx(min(1.0, d.hidden_tv + SAFETY * parts))
        assert d.worst_case_tv >= d.diffuse_tv  # the Valiant-Valiant deviation is the least favourable
        assert d.to_dict()["route"] == d.route

    def test_removing_the_penalty_saves_samples(self):
        """Issue 19 item 3: the exact conditional null (small bin counts) and the Chernoff bound of it
        (many bins) need fewer samples than dividing the Poisson law by P(T = n).  Measured:
        -23.6% (16 bins) and -14.2% (10^4 bins) at alpha 1e-3."""
        for k, saving in ((16, 0.18), (10 ** 4, 0.10)):
            auto = samples_for(0.05, support_size=k, alpha=1e-3)
            penalized = samples_for(0.05, support_size=k, alpha=1e-3, conditional=False)
            poisson = samples_for(0.05, support_size=k, alpha=1e-3, sampling="poisson")
            assert auto <= (1 - saving) * penalized and poisson <= auto

    def test_large_support(self):
        assert samples_for(0.05, support_size=10 ** 5, alpha=1e-10) > 0

    @pytest.mark.parametrize("kw,match", [({}, "exactly one"), ({"probs": [0.5, 0.5], "support_size": 2}, "exactly one"),
                                          ({"support_size": 1}, "support_size"), ({"support_size": 5, "power": 1.0}, "power"),
                                          ({"support_size": 5, "sampling": "x"}, "sampling"),
                                          ({"support_size": 5, "conditional": "x"}, "conditional")])
    def test_bad_input(self, kw, match):
        with pytest.raises(ValueError, match=match):
            samples_for(0.1, alpha=0.01, **kw)
        with pytest.raises(ValueError, match="eps"):
            samples_for(0.0, support_size=5, alpha=0.01)
        with pytest.raises(ValueError, match="n"):
            min_detectable_tv(-1, support_size=5, alpha=0.01)


def test_a_detectability_question_asked_again_gets_the_remembered_answer(monkeypatch):
    from collections import OrderedDict

    from specdec_check.stats import _power

    monkeypatch.setattr(_power, "_DETECT_MEMO", OrderedDict())
    computed = []
    real = _power._detect_uncached
    monkeypatch.setattr(_power, "_detect_uncached", lambda *a: computed.append(a[1:]) or real(*a))
    first = _power.detectability(20_000, support_size=40, alpha=1e-6)
    again = _power.detectability(20_000, support_size=40, alpha=1e-6)
    other = _power.detectability(20_000, support_size=40, alpha=1e-7)
    assert again == first and len(computed) == 2 and other.min_detectable_tv > first.min_detectable_tv
    for question in ({"n": 30_000}, {"support_size": 41}, {"power": 0.9}, {"sampling": "poisson"},
                     {"conditional": False}):  # any other part of the question is another question
        asked = {"n": 20_000, "support_size": 40, "alpha": 1e-6, **question}
        _power.detectability(asked.pop("n"), **asked)
    assert len(computed) == 7
    monkeypatch.setattr(_power, "_DETECT_MEMO_SIZE", 1)
    _power.detectability(20_000, support_size=40, alpha=1e-8)  # the memo keeps this one alone
    assert len(computed) == 8 and len(_power._DETECT_MEMO) == 1
    _power.detectability(20_000, support_size=40, alpha=1e-8)
    _power.detectability(20_000, support_size=40, alpha=1e-6)  # evicted: computed again
    assert len(computed) == 9
