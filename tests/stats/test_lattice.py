"""Tests of the exact lattice laws behind identity_test's global part (specdec_check.stats._lattice).

Every law is compared with brute-force enumeration (Poisson products, multinomials);
all checks are deterministic.
"""
import dataclasses
import itertools

import numpy as np
import pytest
from scipy import stats

from specdec_check.stats import _lattice as L

LEVELS = (1e-2, 1e-4, 1e-6, 1e-9, 1e-12)


def zipf(k, s=1.0):
    p = np.arange(1, k + 1, dtype=float) ** -s
    return p / p.sum()


def bin_index(table, b, N):
    """Lattice index of bin ``b``'s term for counts ``N`` (brute force, from the tables)."""
    rel = N - table.lo[b]
    inside = (rel >= 0) & (rel < table.lens[b])
    return np.where(inside, table.idx[table.offsets[b] + np.clip(rel, 0, table.lens[b] - 1)], table.tau_idx[b])


def brute_poisson_tail(table, nmax=400):
    law = np.array([1.0])
    for b in range(table.nbins):
        N = np.arange(nmax)
        law = np.convolve(law, np.bincount(bin_index(table, b, N), weights=stats.poisson.pmf(N, table.mu[b])))
    return np.cumsum(law[::-1])[::-1]


def brute_multinomial_tail(table, P, n):
    B = len(P)
    outs = np.array([c for c in itertools.product(range(n + 1), repeat=B - 1) if sum(c) <= n])
    counts = np.c_[outs, n - outs.sum(axis=1)]
    law = np.bincount(table.index_of(counts), weights=stats.multinomial.pmf(counts, n, P))
    return np.cumsum(law[::-1])[::-1]


def assert_tight_upper_bound(got, exact, rtol=1e-6, atol=L.FFT_ABS_ERR):
    """``got >= exact`` everywhere it matters and ``got <= exact (1 + rtol) + atol`` down to 1e-12
    (``atol``: the documented FFT allowance, divided by ``P(T = n)`` for conditional laws)."""
    for lev in LEVELS:
        i = np.flatnonzero(exact <= lev)[0]
        assert exact[i] * (1 - 1e-9) <= got[i] <= exact[i] * (1 + rtol) + atol, (lev, got[i], exact[i])
    ok = exact > 1e-30
    assert np.all(got[ok] >= exact[ok] * (1 - 1e-9))


class TestPoissonLaw:
    CASES = [
        ("two bins", np.array([6.0, 14.0]), np.ones(2)),
        ("light and weighted", np.array([0.7, 2.0, 30.0]), np.array([0.4, 0.6, 1.0])),
        ("equal bins", np.full(3, 4.0), np.ones(3)),
    ]

    @pytest.mark.parametrize("name,mu,w", CASES, ids=[c[0] for c in CASES])
    def test_matches_brute_force(self, name, mu, w):
        table = L.z_table(mu, w)
        exact = brute_poisson_tail(table)
        assert_tight_upper_bound(L.poisson_law(table).sf(np.arange(len(exact))), exact)

    def test_tree_agrees_with_spectral(self):
        """The two Poisson engines (bucketed tree, spectral) give the same tails (both exact)."""
        P = zipf(150, 1.1)
        table = L.z_table(3000 * P, (P / P.max()) ** (1 / 3))
        atoms = L._atoms(table)
        frame = L._frame(table, atoms)
        for i in (0, 1):
            lo_s, tail_s, _ = L._spectral_pass_tail(table, atoms, frame, i)
            lo_t, tail_t, _ = L._tree_pass_tail(table, atoms, frame, i)
            a, b = max(lo_s, lo_t), min(lo_s + len(tail_s), lo_t + len(tail_t))
            ts, tt = tail_s[a - lo_s:b - lo_s], tail_t[a - lo_t:b - lo_t]
            sel = (ts > 1e-12) if i == 0 else (ts > 1e-30)
            sel &= ts < 0.5
            assert sel.sum() > 50
            np.testing.assert_allclose(tt[sel], ts[sel], rtol=1e-6, atol=1e-13 if i == 0 else 0)

    @pytest.mark.parametrize("B,mu0", [(2, 5.0), (64, 5.0), (300, 1e4), (2000, 2.0)])
    def test_two_tilts_agree_in_far_tail(self, B, mu0):
        """Tail probabilities 1e-6..1e-15 from two different Esscher tilts agree (deterministic)."""
        P = zipf(B)
        table = L.z_table(mu0 * B * P, (P / P.max()) ** (1 / 3))
        atoms = L._atoms(table)
        frame = L._frame(table, atoms)
        run = L._spectral_pass_tail if len(atoms.mult) < 500 else L._tree_pass_tail
        lo1, t1, _ = run(table, atoms, frame, 1)
        other = dataclasses.replace(frame, theta_h=0.7 * frame.theta_h)
        lo2, t2, _ = run(table, atoms, other, 1)
        a, b = max(lo1, lo2), min(lo1 + len(t1), lo2 + len(t2))
        x1, x2 = t1[a - lo1:b - lo1], t2[a - lo2:b - lo2]
        sel = (x1 < 1e-6) & (x1 > 1e-15)
        assert sel.any()
        np.testing.assert_allclose(x2[sel], x1[sel], rtol=1e-6)


@pytest.mark.parametrize("mu,lattice", [(5e5 * zipf(59, 0.5), True), (np.full(3, 4.0), False)],
                         ids=["59 leaves at n 3e7", "3 equal bins"])
def test_the_log_mgf_is_the_cgf_and_the_per_atom_sum_number_for_number(mu, lattice):
    """K(theta) of a law's atoms three ways: log_mgf, cgf's K, and p e^{theta x} formed per atom. They are the
    same floating-point numbers (a faster path that moved a p-value's last digit would change reports), and the
    per-value table of e^{theta x} is used where the atoms take few distinct values (many leaves)."""
    atoms = L._atoms(L.z_table(mu, (mu / mu.max()) ** (1 / 3)))
    assert (atoms.lattice is not None) == lattice
    theta = np.geomspace(1e-6, 0.5 / max(1.0, float(atoms.x.max())), 21)
    direct = np.array([(atoms.mult * np.log(np.add.reduceat(atoms.p * np.exp(t * atoms.x), atoms.starts))).sum()
                       for t in theta])
    np.testing.assert_array_equal(atoms.log_mgf(theta), direct)
    np.testing.assert_array_equal(atoms.cgf(theta)[0], direct)


def test_a_repeated_tilt_grid_is_computed_once_and_handed_out_as_a_copy(monkeypatch):
    """The Chernoff searches, a spectral pass's overflow bound and the Chernoff law ask one law for the same tilt
    grid (and theta = 0) several times: the second ask is not computed again, gives the same numbers, and a caller
    that writes into what it got does not change what the next caller gets."""
    atoms = L._atoms(L.z_table(np.full(4, 50.0), np.ones(4)))
    computed = []
    real = L._Atoms._log_mgf
    monkeypatch.setattr(L._Atoms, "_log_mgf", lambda self, th: computed.append(th.size) or real(self, th))
    grid = np.geomspace(1e-4, 0.05, 32)
    first = atoms.log_mgf(grid)
    first_again = first.copy()
    first[:] = 0.0  # the caller's own array
    second = atoms.log_mgf(grid.copy())
    np.testing.assert_array_equal(second, first_again)
    assert computed == [32]
    atoms.log_mgf(grid[:31])  # another grid is computed
    assert computed == [32, 31]
    k, k1, k2 = atoms.cgf(0.0)
    mean = float(k1[0])
    k1[:] = -1.0
    assert atoms.cgf(0.0)[1][0] == mean == float(atoms._cgf(np.zeros(1))[1][0])


class TestConditionalLaw:
    CASES = [(np.array([0.3, 0.7]), 40), (np.array([0.2, 0.3, 0.5]), 30), (np.full(3, 1 / 3), 60),
             (np.array([0.05, 0.15, 0.8]), 45)]

    @pytest.mark.parametrize("P,n", CASES)
    def test_matches_multinomial_enumeration(self, P, n):
        table = L.z_table(n * P, np.ones(len(P)))
        exact = brute_multinomial_tail(table, P, n)
        law = L.conditional_law(table, n)
        assert_tight_upper_bound(law.sf(np.arange(len(exact))), exact, atol=L.FFT_ABS_ERR / law.divisor)

    @pytest.mark.parametrize("P,n", CASES)
    def test_chernoff_bound_is_valid(self, P, n):
        """The Chernoff bound of the conditional law, and its minimum with the penalized Poisson law,
        never fall below the exact multinomial tail."""
        table = L.z_table(n * P, np.ones(len(P)))
        exact = brute_multinomial_tail(table, P, n)
        law = L.chernoff_conditional_law(table, n)
        s = np.arange(len(exact))
        ok = exact > 1e-30
        assert np.all(law.chernoff_sf(s)[ok] >= exact[ok] * (1 - 1e-9))
        assert np.all(law.sf(s)[ok] >= exact[ok] * (1 - 1e-9))
        for alpha in (1e-3, 1e-9):  # the threshold is a valid rejection region
            assert exact[min(law.isf(alpha), len(exact) - 1)] <= alpha

    def test_chernoff_beats_the_penalty_for_many_bins(self):
        """For 10^4 equal bins at n = 10^5 the Chernoff route's threshold is well below the penalized
        one (which divides the Poisson law by P(T = n) ~ 1/793) and above the Poisson one."""
        k, n = 10 ** 4, 10 ** 5
        table = L.z_table(np.full(k, n / k), np.ones(k))
        law = L.chernoff_conditional_law(table, n)
        pois = L.poisson_law(table)
        sd = np.sqrt(2 * k) / table.h
        for alpha in (5e-4, 5e-11):
            s_pen, s_ch, s_poi = pois.isf(alpha * law.divisor), law.isf(alpha), pois.isf(alpha)
            assert s_poi < s_ch < s_pen
            assert (s_pen - s_ch) / sd > 0.5  # half a standard deviation or more

    @pytest.mark.parametrize("P,n", [(np.full(16, 1 / 16), 800), (np.full(64, 1 / 64), 6400),
                                     (zipf(32), 3000), (zipf(8), 200)])
    def test_conditional_quantile_below_poisson(self, P, n):
        """The planner uses the Poisson quantile for the conditional route: it must not be the smaller."""
        table = L.z_table(n * P, (P / P.max()) ** (1 / 3))
        cond, pois = L.conditional_law(table, n), L.poisson_law(table)
        for alpha in (1e-2, 1e-3, 1e-6, 1e-10):
            assert cond.isf(alpha) <= pois.isf(alpha), alpha


class TestTables:
    def test_index_matches_rounded_statistic(self):
        P = zipf(50, 1.1)
        n = 2000
        table = L.z_table(n * P, (P / P.max()) ** (1 / 3))
        counts = np.random.default_rng(1234).multinomial(n, P, size=200)
        S = table.index_of(counts)
        exact = (table.w * (np.minimum(L.z_terms(counts, table.mu), L.TAU) - table.fmin)).sum(axis=1) / table.h
        assert np.all(np.abs(S - exact) <= 0.5 * table.nbins + 1e-9)
        Z = table.statistic(counts)
        np.testing.assert_allclose(Z, exact * table.h + (table.w * table.fmin).sum(), rtol=1e-12, atol=1e-9)

    def test_equal_bins_share_one_table(self):
        table = L.z_table(np.full(10 ** 5, 3.0), np.ones(10 ** 5))
        assert len(table.leaf_rep) == 1 and len(table.idx) < 100

    def test_truncation_atom_is_exact(self):
        """Counts far outside the central range get the truncation atom (value TAU), not an error."""
        table = L.z_table(np.array([5.0, 5.0]), np.ones(2))
        assert table.index_of(np.array([1000, 0])) == table.tau_idx[0] + bin_index(table, 1, np.array(0))
        assert table.statistic(np.array([1000, 0])) == pytest.approx(L.TAU + L.z_terms(0, 5.0))


def test_the_cache_keeps_its_byte_bound_and_an_evicted_law_is_recomputed_the_same(monkeypatch):
    """The cache of tables, atoms, frames and laws is bounded by the bytes of its arrays: past the bound the least
    recently used entries go, and a law computed again after its eviction is the same law."""
    monkeypatch.setattr(L, "_CACHE", type(L._CACHE)())
    monkeypatch.setattr(L, "_CACHE_SIZES", {})
    mus = [np.full(8, 40.0), np.linspace(5.0, 60.0, 12), np.geomspace(2.0, 300.0, 20)]
    tables = [L.z_table(mu, np.ones(mu.size)) for mu in mus]
    first = L.poisson_law(tables[0])
    held = sum(L._CACHE_SIZES[k] for k in L._CACHE)
    assert held > 0 and first.sf(np.arange(-5, 40)).size == 45
    monkeypatch.setattr(L, "_CACHE_BYTES", held)  # room for about what the first law needed
    for table in tables[1:]:
        L.poisson_law(table)
        assert sum(L._CACHE_SIZES[k] for k in L._CACHE) <= held or len(L._CACHE) == 1
    assert b"P" + tables[0].key not in L._CACHE  # evicted
    again = L.poisson_law(tables[0])
    assert again is not first
    s = np.arange(first.lo0 - 3, first.lo0 + len(first.tail0) + 3)
    np.testing.assert_array_equal(again.sf(s), first.sf(s))
    assert again.isf(1e-6) == first.isf(1e-6)
