"""The scipy.special forms of the distribution functions (specdec_check.stats._special) against scipy.stats:
the same float, bit for bit, on grids that include every boundary the identity and power code passes."""

import numpy as np
import pytest
from scipy import stats

from specdec_check.stats import _special


def _same(ours, theirs):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape
    assert np.array_equal(ours.reshape(-1).view(np.int64), theirs.reshape(-1).view(np.int64)), (ours, theirs)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000, 9232, 50_000_000])
def test_binomial_tails_match_scipy_stats(n):
    rng = np.random.default_rng(n)
    k = np.unique(np.r_[-2, -1, 0, 1, n - 2, n - 1, n, n + 1, rng.integers(0, n + 1, 40)])
    for p in (0.0, 1e-12, 1e-3, 0.25, 0.5, 0.999, 1.0, float(rng.random())):
        probs = np.full(k.shape, p)
        _same(_special.binom_sf(k, n, probs), stats.binom.sf(k, n, probs))
        _same(_special.binom_cdf(k, n, probs), stats.binom.cdf(k, n, probs))


@pytest.mark.parametrize("mu", [0.0, 1e-9, 0.3, 5.0, 123.456, 9232.0, 5e7])
def test_poisson_functions_match_scipy_stats(mu):
    k = np.unique(np.r_[-2, -1, 0, 1, 2, int(mu), int(mu) + 1, int(2 * mu) + 3, 10**8])
    means = np.full(k.shape, mu)
    _same(_special.poisson_sf(k, means), stats.poisson.sf(k, means))
    _same(_special.poisson_cdf(k, means), stats.poisson.cdf(k, means))
    for one in k[k >= 0]:
        _same(_special.poisson_pmf(int(one), mu), float(stats.poisson.pmf(int(one), mu)))


def test_normal_isf_matches_scipy_stats_including_the_sign_of_zero():
    for q in (1e-300, 1e-20, 1e-9, 0.001, 0.01, 0.05, 0.5, 0.9, 0.99, 1 - 1e-12):
        _same(_special.norm_isf(q), float(stats.norm.isf(q)))
    assert str(_special.norm_isf(0.5)) == str(float(stats.norm.isf(0.5))) == "0.0"


def test_the_checker_and_its_tests_import_no_scipy_stats():
    """The point of the module: the checker's import, an identity test (pooling, exact calibration, max-cell
    tails) and a power plan need no scipy.stats (nor scipy.optimize: the plan's root is :mod:`._roots`)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, specdec_check.checker, specdec_check.samplers; "
            "from specdec_check.stats import identity_test, detectability; "
            "law = np.array([0.5, 0.25, 0.125, 0.125]); "
            "identity_test(np.array([480, 260, 130, 130]), law, alpha=1e-3); "
            "identity_test(np.array([48, 26, 13, 13]), law, alpha=1e-3, poisson_mean=100.0); "
            "detectability(1000, probs=law, alpha=1e-3); "
            "print('scipy.stats' in sys.modules, 'scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False", out.stderr[-2000:]


def _logsumexp_cases():
    rng = np.random.default_rng(7)
    return [rng.normal(size=7), rng.normal(size=(5, 9)) * 50, rng.normal(size=(4, 300)) * 1e3, np.array(3.0),
            np.zeros(0), np.array([-np.inf, -np.inf]), np.array([1.0, 1.0, 1.0]), np.array([np.nan, 1.0]),
            np.array([np.inf, 1.0]), np.array([np.inf, np.inf]), np.array([-np.inf, 2.0, 2.0, -3.0]),
            np.array([[-np.inf, -np.inf], [0.0, -np.inf]]), np.array([800.0, 799.0, -1e308]),
            np.log(rng.dirichlet(np.ones(50), size=3)), np.array([1, 2, 3])]


@pytest.mark.parametrize("case", range(15))
def test_logsumexp_matches_scipy_special_on_every_axis(case):
    from scipy import special

    a = _logsumexp_cases()[case]
    for axis in [None] + list(range(np.ndim(a))):
        ours, theirs = _special.logsumexp(a, axis=axis), special.logsumexp(a, axis=axis)
        assert type(ours) is type(theirs) and np.shape(ours) == np.shape(theirs)
        _same(np.asarray(ours, dtype=np.float64).ravel(), np.asarray(theirs, dtype=np.float64).ravel())
