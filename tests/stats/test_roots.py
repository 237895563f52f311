"""brent_root against scipy.optimize.brentq: the same float on every function (the planner's numbers, and so the
reports, depend on the root to its last bit), and the same refusals."""

import math

import numpy as np
import pytest

from specdec_check.stats import _power
from specdec_check.stats._roots import brent_root

optimize = pytest.importorskip("scipy.optimize")


def _functions():
    rng = np.random.default_rng(20261205)
    for _ in range(300):
        a, b, c = rng.normal(size=3)
        root = rng.uniform(0.05, 0.95)
        yield f"cubic {a:.3f} {b:.3f}", (lambda x, r=root, a=a, b=b: (x - r) * (1 + a * a + b * x * x) + 1e-3 * c)
        yield f"exp {a:.3f}", (lambda x, r=root, a=a: math.expm1(3 * (x - r)) * (1 + abs(a)))
        yield f"step-like {a:.3f}", (lambda x, r=root, a=a: math.tanh(40 * (x - r)) + 0.01 * a)
        k = int(rng.integers(1, 6))
        yield f"power {k}", (lambda x, r=root, k=k: math.copysign(abs(x - r) ** (1 / k), x - r))
    yield "linear", (lambda x: 2 * x - 1)
    yield "sqrt-shaped", (lambda x: math.sqrt(x) - 0.3)


@pytest.mark.parametrize("xtol,rtol", [(1e-7, 1e-7), (2e-12, 4 * np.finfo(float).eps), (1e-3, 1e-9)])
def test_the_same_float_as_scipys_brentq(xtol, rtol):
    checked = 0
    for name, f in _functions():
        if np.sign(f(1e-9)) == np.sign(f(1.0)):
            continue
        ours = brent_root(f, 1e-9, 1.0, xtol=xtol, rtol=rtol)
        theirs = optimize.brentq(f, 1e-9, 1.0, xtol=xtol, rtol=rtol)
        assert ours == theirs, (name, ours, theirs)
        checked += 1
    assert checked > 1000


def test_the_planners_roots_are_scipys(monkeypatch):
    """The planner's own power gaps (the function _eps_for_family solves), over support sizes, sample sizes and
    alphas: every root equal to scipy's."""
    roots = []
    real = _power.brent_root

    def both(f, lo, hi, **kw):
        ours = real(f, lo, hi, **kw)
        roots.append((ours, optimize.brentq(f, lo, hi, **kw)))
        return ours

    monkeypatch.setattr(_power, "brent_root", both)
    monkeypatch.setattr(_power, "_DETECT_MEMO", type(_power._DETECT_MEMO)())  # every plan made here, not remembered
    for support in (2, 9, 59, 876):
        for n in (500, 20_000, 3_000_000):
            for alpha in (1e-3, 2.5e-7):
                _power.detectability(n, support_size=support, alpha=alpha)
    assert len(roots) > 30
    assert all(ours == theirs for ours, theirs in roots), [r for r in roots if r[0] != r[1]][:3]


def test_the_same_refusals():
    with pytest.raises(ValueError, match="same sign"):
        brent_root(lambda x: x + 1, 0.0, 1.0, xtol=1e-7, rtol=1e-7)
    with pytest.raises(ValueError, match="NaN"):
        brent_root(lambda x: math.nan if x > 0.5 else -1.0, 0.0, 1.0, xtol=1e-7, rtol=1e-7)
    with pytest.raises(RuntimeError, match="no convergence"):
        brent_root(lambda x: 1.0 if x > 0.3 else -1.0, 0.0, 1.0, xtol=1e-15, rtol=1e-15, maxiter=3)
    assert brent_root(lambda x: x, 0.0, 1.0, xtol=1e-7, rtol=1e-7) == 0.0  # a root at an end is that end
