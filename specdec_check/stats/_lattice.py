"""Exact null law of the lattice-rounded G statistic for independent Poisson cells.

For bin means ``mu_b`` the per-bin G term is ``g_b(N) = 2 [N log(N/mu_b) - (N - mu_b)]``
(nonnegative).  The test statistic is the *lattice* G statistic
``S = sum_b min(round(g_b(N_b) / h), M)`` (in units of ``h``; the observed value
is rounded with the very same table, so the law below is the exact law of the
statistic actually used -- rounding costs no validity), whose exact law under
independent ``N_b ~ Poisson(mu_b)`` is the convolution of the per-bin lattice laws.
The convolution is computed by FFT on a pairwise tree, clipping at the cap ``M``
(terms are nonnegative, so mass above the cap stays above it: it goes to an
"overflow" atom that always counts as rejection).  The Poisson mass outside each
bin's enumerated range is computed exactly and also sent to overflow, so every
truncation moves mass *up*: tail probabilities are upper bounds, up to FFT
round-off, for which an explicit allowance is added.

Two passes are made: an untilted one (absolute accuracy ~1e-14, for ordinary
p-values) and an exponentially tilted one (Esscher tilt, tilting commutes with
convolution) centred in the far tail, which gives relative accuracy for p-values
down to ~1e-30.  This is the "Poissonize, convolve exactly on a grid with
conservative rounding" method of Perkins, Tygert & Ward (2011) / the project notes
(statistics.md section 1.3).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy import special, stats

GRID = 2048          # max lattice points below the cap (1024 for <= 128 bins)
FFT_ABS_ERR = 1e-13  # allowance added to untilted tail probabilities
TILT_REL_ERR = 1e-7  # relative allowance for tilted tail probabilities
_CACHE: "OrderedDict[bytes, LatticeLaw]" = OrderedDict()
_CACHE_SIZE = 128


def g_terms(N, mu):
    N = np.asarray(N, dtype=np.float64)
    return np.maximum(2.0 * (special.xlogy(N, N / mu) - (N - mu)), 0.0)


@dataclass(frozen=True)
class LatticeLaw:
    h: float
    lo: np.ndarray        # first enumerated N per bin
    offsets: np.ndarray   # start of bin b's index table in ``table``
    table: np.ndarray     # lattice index of g_b(N) for N = lo_b + j (GRID = overflow)
    tail0: np.ndarray     # untilted P(S >= s), s = 0..GRID (index GRID = overflow atom)
    tail1: np.ndarray     # tilted-pass P(S >= s)
    overflow: float
    grid: int = GRID

    def index_of(self, bin_counts):
        """Lattice statistic (in units of h) of observed bin counts ``[..., B]``."""
        bin_counts = np.asarray(bin_counts)
        rel = bin_counts - self.lo
        lens = np.diff(self.offsets)
        inside = (rel >= 0) & (rel < lens)
        pos = np.where(inside, self.offsets[:-1] + rel, 0)
        idx = np.where(inside, self.table[pos], self.grid)
        return np.minimum(idx.sum(axis=-1), self.grid)

    def sf(self, s):
        """Upper bound on P(S >= s) under the Poisson null (vectorised over ``s``)."""
        s = np.clip(np.asarray(s, dtype=np.int64), 0, self.grid)
        t0 = self.tail0[s]
        tilted = np.minimum(t0 + FFT_ABS_ERR, self.tail1[s] * (1 + TILT_REL_ERR) + 1e-300)
        out = np.where(t0 >= 1e-9, t0 + FFT_ABS_ERR, tilted)
        out = np.where(s >= self.grid, self.overflow, out)
        out = np.where(s <= 0, 1.0, out)
        return np.minimum(out, 1.0)


_SUPPORT_CACHE: "OrderedDict[bytes, tuple]" = OrderedDict()


def _support(mu):
    """Enumerated N range per bin with Poisson pmf and unweighted G terms (cached)."""
    key = mu.tobytes()
    hit = _SUPPORT_CACHE.get(key)
    if hit is not None:
        return hit
    sd = np.sqrt(mu)
    lo = np.maximum(0, np.floor(mu - 9.0 * sd - 10.0)).astype(np.int64)
    hi = np.ceil(mu + 9.0 * sd + 25.0).astype(np.int64)
    lens = hi - lo + 1
    offsets = np.r_[0, np.cumsum(lens)]
    B = len(mu)
    binid = np.repeat(np.arange(B), lens)
    N = (np.arange(offsets[-1]) - np.repeat(offsets[:-1], lens)) + np.repeat(lo, lens)
    mub = mu[binid]
    g = g_terms(N, mub)
    pmf = np.exp(special.xlogy(N, mub) - mub - special.gammaln(N + 1.0))
    # exact Poisson mass outside [lo, hi]: always sent to the overflow (rejecting) atom
    outside = np.where(lo > 0, special.pdtr(np.maximum(lo - 1, 0), mu), 0.0) + special.pdtrc(hi, mu)
    hit = (lo, offsets, binid, g, pmf, outside)
    _SUPPORT_CACHE[key] = hit
    if len(_SUPPORT_CACHE) > 8:
        _SUPPORT_CACHE.popitem(last=False)
    return hit


def _bin_laws(mu, h, w, GRID):
    """Per-bin lattice laws, shape (B, GRID), plus overflow mass per bin and index tables."""
    lo, offsets, binid, g, pmf, outside = _support(mu)
    B = len(mu)
    idx = np.minimum(np.floor(g * w[binid] / h + 0.5), GRID).astype(np.int64)
    laws = np.bincount(binid * (GRID + 1) + idx, weights=pmf, minlength=B * (GRID + 1)).reshape(B, GRID + 1)
    over = laws[:, GRID] + outside + 1e-300
    return laws[:, :GRID].copy(), over, lo, offsets, idx


def _tree(laws, over, theta, h, GRID):
    """Convolve all rows; returns (tail probabilities array length GRID+1, overflow)."""
    j = np.arange(GRID)
    tilt = -theta * h * j  # log of untilt factor
    with np.errstate(divide="ignore"):
        la = np.log(laws) + (theta * h * j)[None, :]
    ls = la.max(axis=1)
    ls[~np.isfinite(ls)] = 0.0
    a = np.exp(la - ls[:, None])
    o = over.copy()
    nfft = 2 * GRID
    while a.shape[0] > 1:
        carry = None
        if a.shape[0] % 2:  # odd node passes through to the next level unchanged
            carry = (a[-1:], ls[-1:], o[-1:])
            a, ls, o = a[:-1], ls[:-1], o[:-1]
        fa = sfft.rfft(a[0::2], nfft, axis=1)
        fb = sfft.rfft(a[1::2], nfft, axis=1)
        c = sfft.irfft(fa * fb, nfft, axis=1)[:, : 2 * GRID - 1]
        np.maximum(c, 0.0, out=c)
        lsn = ls[0::2] + ls[1::2]
        if theta == 0.0:
            spill = c[:, GRID:].sum(axis=1) * np.exp(np.minimum(lsn, 700.0))
        else:
            fac = np.exp(np.minimum(lsn[:, None] - theta * h * np.arange(GRID, 2 * GRID - 1)[None, :], 700.0))
            spill = (c[:, GRID:] * fac).sum(axis=1)
        o = o[0::2] + o[1::2] + spill
        c = c[:, :GRID]
        mx = c.max(axis=1, keepdims=True)
        mx[mx == 0] = 1.0
        a = c / mx
        ls = lsn + np.log(mx[:, 0])
        if carry is not None:
            a = np.vstack([a, carry[0]])
            ls = np.r_[ls, carry[1]]
            o = np.r_[o, carry[2]]
    logp = np.log(np.maximum(a[0], 1e-320)) + ls[0] + tilt
    p = np.where(a[0] > 0, np.exp(np.minimum(logp, 700.0)), 0.0)
    overflow = float(min(1.0, o[0]))
    tail = np.empty(GRID + 1)
    tail[GRID] = overflow
    tail[:GRID] = np.cumsum(p[::-1])[::-1] + overflow
    return tail, overflow


def _cap(w):
    """Cap of the lattice in statistic units, beyond any p-value of interest.

    For unit weights ~1.25x the 1e-40 quantile of chi2_B; for weighted sums the
    same via the Satterthwaite scaled-chi2 match (only resolution depends on it:
    mass above the cap is counted as rejection, so the choice never affects validity).
    """
    a = float((w**2).sum() / w.sum())
    nu = float(w.sum() ** 2 / (w**2).sum())
    return 1.25 * a * float(stats.chi2.isf(1e-40, nu)) + 40.0 * float(w.max())


def _tilt(w):
    """Esscher tilt putting the tilted mean near the 1e-16 quantile (scaled-chi2 match)."""
    a = float((w**2).sum() / w.sum())
    nu = float(w.sum() ** 2 / (w**2).sum())
    t_star = a * float(stats.chi2.isf(1e-16, nu))
    # tilted mean of sum_b w_b chi2_1 is sum_b w_b / (1 - 2 theta w_b)
    f = lambda th: float((w / (1 - 2 * th * w)).sum()) - t_star
    top = 0.45 / float(w.max())
    if f(0.0) >= 0:
        return 0.0
    if f(top) <= 0:
        return top
    from scipy.optimize import brentq
    return float(brentq(f, 0.0, top))


def lattice_law(mu, weights=None):
    """Exact (conservative) Poisson lattice law of ``sum_b w_b g_b(N_b)``; cached on ``(mu, w)``."""
    mu = np.ascontiguousarray(mu, dtype=np.float64)
    w = np.ones_like(mu) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    key = mu.tobytes() + b"|" + w.tobytes()
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    B = len(mu)
    grid = 1024 if B <= 128 else GRID
    h = _cap(w) / grid
    laws, over, lo, offsets, table = _bin_laws(mu, h, w, grid)
    theta = _tilt(w)
    tail1, overflow = _tree(laws, over, theta, h, grid)
    # the untilted pass is accurate in absolute terms only; its spill into the
    # overflow atom is FFT noise, so take the overflow mass from the tilted pass
    tail0, over0 = _tree(laws, over, 0.0, h, grid)
    tail0 = tail0 - over0 + overflow
    # self-check of the tilted pass where both passes are accurate; if they disagree,
    # never use the tilted pass (fall back to the absolute-error bound: conservative)
    # (the untilted pass carries a small *positive* bias from clipping FFT noise at 0,
    # measured <= 1e-12 for 512 bins, hence the absolute slack)
    both = (tail0 >= 1e-9) & (tail0 <= 1e-6)
    if np.any(both) and np.any(np.abs(tail1[both] - tail0[both]) > 1e-4 * tail0[both] + 1e-11):
        tail1 = np.full_like(tail0, np.inf)
    law = LatticeLaw(h=h, lo=lo, offsets=offsets, table=table, tail0=tail0, tail1=tail1, overflow=overflow,
                     grid=grid)
    _CACHE[key] = law
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return law
