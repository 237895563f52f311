"""The Chernoff bound's faster computation gives the numbers of the plain one (issue 31): its
transforms are the non-negative frequencies of scipy's fft with the conjugates filled in, and its leaves'
counts, pmfs and outside masses are those computed leaf by leaf."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import fft as sfft
from scipy import special

from specdec_check.stats import _lattice
from specdec_check.stats._power import vv_weights


@pytest.mark.parametrize("M", [924, 925, 1024, 7])
def test_products_of_half_spectra_filled_with_conjugates_are_the_full_products(M):
    rng = np.random.default_rng(M)
    spectra_full, spectra_half = [], []
    for mult in (1, 3, 8, 13):
        arr = rng.random((5, M)) * (rng.random((5, M)) < 0.7)
        arr /= arr.sum(axis=1, keepdims=True)
        spectra_full.append(_lattice._cpow(sfft.fft(arr, axis=1), mult))
        spectra_half.append(_lattice._cpow(sfft.rfft(arr, axis=1), mult))
    full, half = spectra_full[0], spectra_half[0]
    for f, h in zip(spectra_full[1:], spectra_half[1:]):
        full, half = full * f, half * h
    k = half.shape[1]
    filled = np.concatenate([half, np.conj(half[:, 1:M - k + 1][:, ::-1])], axis=1)
    # the same numbers; only the sign of a zero imaginary part (at frequency 0 and M / 2) may differ, which the
    # bound never sees (it takes the real part of the spectrum's inner product with the phases, then log max(., 1e-300))
    assert np.array_equal(filled, full)
    assert np.array_equal(filled.real, full.real) and np.signbit(filled.real).tolist() == np.signbit(full.real).tolist()


def _atoms_2d_leaf_by_leaf(table):
    out, outside, over = [], [], 0.0
    for d, b in enumerate(table.leaf_rep):
        mu = table.mu[b]
        a, e = table.offsets[b], table.offsets[b] + table.lens[b]
        lo, hi = int(table.lo[b]), int(table.lo[b] + (e - a) - 1)
        sd = np.sqrt(mu)
        lo2 = min(lo, int(max(0, np.floor(mu - 13.0 * sd - 15.0))))
        hi2 = max(hi, int(np.ceil(mu + 13.0 * sd + 45.0)))
        N = np.arange(lo2, hi2 + 1)
        x = np.full(len(N), table.tau_idx[b], dtype=np.int64)
        x[lo - lo2: hi - lo2 + 1] = table.idx[a:e]
        out.append((N, x, np.exp(special.xlogy(N, mu) - mu - special.gammaln(N + 1.0))))
        mass = (special.pdtr(lo2 - 1, mu) if lo2 > 0 else 0.0) + special.pdtrc(hi2, mu)
        outside.append(mass)
        over += np.sum(table.leaf_of == d) * mass
    return out, np.array(outside), float(over)


@pytest.mark.parametrize("seed", range(6))
def test_the_leaves_counts_pmfs_and_outside_masses_are_those_of_one_leaf_at_a_time(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 80_000))
    probs = rng.dirichlet(np.full(int(rng.integers(3, 300)), 0.4))
    probs = np.repeat(probs, rng.integers(1, 4, probs.size))  # equal bins: leaves with multiplicities
    probs /= probs.sum()
    table = _lattice.z_table(n * probs, vv_weights(probs))
    n2d, outside, over = _lattice._atoms_2d_parts(table)
    want, want_outside, want_over = _atoms_2d_leaf_by_leaf(table)
    assert len(n2d) == len(want)
    for got, expected in zip(n2d, want):
        assert all(g.tobytes() == e.tobytes() and g.dtype == e.dtype for g, e in zip(got, expected))
    assert outside.tobytes() == want_outside.tobytes() and over == want_over


def _tilted_total_with_full_spectra(n2d, ls, theta, mult, M, n):
    """:func:`_lattice._tilted_total_probs` as computed before issue 31: every frequency, leaf by leaf."""
    acc = None
    for d, (N, x, p) in enumerate(n2d):
        with np.errstate(divide="ignore"):
            lw = np.log(p)[None, :] + theta[:, None] * x[None, :]
        arr = np.zeros((len(theta), M))
        np.add.at(arr, (slice(None), N % M), np.exp(lw - ls[d][:, None]))
        f = _lattice._cpow(sfft.fft(arr, axis=1), mult[d])
        acc = f if acc is None else acc * f
    phase = np.exp(2j * np.pi * ((np.arange(M) * (n % M)) % M) / M)
    return (acc @ phase).real / M


@pytest.mark.parametrize("seed", range(4))
def test_the_tilted_probabilities_of_the_total_are_those_of_full_spectra(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3000, 40_000))
    probs = rng.dirichlet(np.full(int(rng.integers(20, 200)), 0.5))
    probs = probs[probs * n > 1.0]
    probs = np.repeat(probs, rng.integers(1, 3, probs.size))
    probs /= probs.sum()
    table = _lattice.z_table(n * probs, vv_weights(probs))
    n2d, _, _ = _lattice._atoms_2d_parts(table)
    mult = _lattice._atoms(table).mult.astype(np.int64)
    theta = np.geomspace(1e-3, 0.2, _lattice.CHERNOFF_TILTS)
    ls = np.array([_lattice.logsumexp(np.log(p)[None, :] + theta[:, None] * x[None, :], axis=1) for _, x, p in n2d])
    M = _lattice._n_freq(n)
    got = _lattice._tilted_total_probs(n2d, ls, theta, mult, M, n)
    assert got.tobytes() == _tilted_total_with_full_spectra(n2d, ls, theta, mult, M, n).tobytes()
    assert np.all(got > 0)  # the tilted probabilities of the total: positive, not a degenerate comparison
