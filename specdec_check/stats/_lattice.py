"""Exact null law of the lattice-rounded, bias-corrected chi-square statistic.

Per pooled bin ``b`` with null mean ``mu_b`` the term is the unbiased chi-square
cell of Acharya, Daskalakis & Kamath (2015, arXiv:1507.05952, Alg. 1)

    f_b(N) = ((N - mu_b)^2 - N) / mu_b,      E f_b = 0 and Var f_b = 2 under Poisson(mu_b),

truncated at ``TAU`` (far beyond anything the null produces: a bin that large is
caught by the max-cell part anyway) and weighted by ``w_b``.  The statistic is
``Z_w = sum_b w_b min(f_b(N_b), TAU)``; the test uses its lattice version

    S = sum_b round(w_b (min(f_b(N_b), TAU) - min_N f_b(N)) / h)      (nonnegative integers),

and the observed value is rounded with the very same tables, so the law below is
the exact law of the statistic actually used (rounding costs no validity).

Two laws are computed, both conservatively (every truncation moves mass *up* in
``S`` or into an "overflow" atom that always counts as rejection):

* **Poisson** (independent ``N_b ~ Poisson(mu_b)``): the convolution of the per-bin
  lattice laws.  With few distinct bin laws (a uniform law has one) it is computed
  spectrally: each distinct leaf's discrete Fourier transform on a window
  ``[o, o + W)`` of ``S`` raised to its multiplicity; mass below ``o`` wraps *up*
  (conservative) and the mass above ``o + W`` that wraps down is bounded by a
  Chernoff bound from the exact cumulant generating function and added to every tail.
  With many distinct laws a pairwise tree is used instead, leaves bucketed by width;
  nodes are windowed (mass more than ``C_LO`` standard deviations below a node's mean
  is moved up to the window, mass above goes to an overflow atom).  Two passes are
  made as in Perkins, Tygert & Ward (2011, arXiv:1108.4126): an untilted one
  (absolute accuracy ~1e-13) and an exponentially tilted one (Esscher tilt; tilting
  commutes with convolution) centred in the far tail (relative accuracy for p-values
  down to ~1e-30).
* **Multinomial** (fixed ``n``: Poisson conditioned on ``T = sum_b N_b = n``): the
  joint law of ``(S, T mod M)`` spectrally, with complex leaf weights
  ``e^{2 pi i j N / M}`` (``j < M``, a discrete Fourier transform in ``T``), then
  ``P(S >= s | T = n) <= P(S >= s, T = n mod M) / P(T = n)``: exact up to the
  aliased rows ``T = n +- M, ...`` (nonnegative, so the bound stays valid; with
  ``M ~ 9 sqrt(n)`` they weigh ~e^-40).  This removes the ``1 / P(T = n) ~
  sqrt(2 pi n)`` penalty of dividing the Poisson law by ``P(T = n)``
  (Mitzenmacher & Upfal 2005, Thm 5.7), at ``M`` times the cost.  Where that is
  too costly, a Chernoff bound on the *conditional* law is used instead (together
  with the Poisson law divided by ``P(T = n)``, whichever is smaller):
  ``P(S >= s | T = n) <= e^{-theta s} E[e^{theta S}; T = n mod M] / P(T = n)``,
  whose numerator is exact (a DFT in ``T`` of each leaf's tilted weights); its
  looseness is the Chernoff factor ``~ theta sd sqrt(2 pi)`` instead of ``sqrt(2 pi n)``.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy import special

from ._special import logsumexp, poisson_pmf

__all__ = ["ZTable", "LatticeTail", "BoundedTail", "z_table", "z_terms", "poisson_law", "conditional_law",
           "conditional_cost", "chernoff_conditional_law", "chernoff_cost", "null_mean", "TAU"]

TAU = 100.0          # per-bin truncation of f_b: P(chi2_1 > 101) ~ 1e-23, and TAU is above every
                     # 1e-13 quantile of a sum of two bins, so it binds only far beyond any alpha
C_LO = 10.0          # windows start C_LO sd below the mean (mass below moves up: ~e^-50 of it)
C_LO_TILTED = 6.0    # the same for the tilted pass (its mass below only costs relative accuracy)
RES = 0.35           # lattice step h = RES * RMS per-bin sd: rounding adds h^2/12 ~ 1% to the variance
W_MAX = 16384        # longest node array (h grows past this: B ~ 5e4 bins of equal weight)
UPPER_SLACK = 2.6 * TAU  # windows reach 16 sd and ~2.6 truncated terms above the mean: three bins at
                         # TAU together (~1e-23 for bins of mu >= 0.5) are what the overflow can lose
FFT_ABS_ERR = 1e-13  # allowance added to untilted tail probabilities (FFT round-off)
TILT_REL_ERR = 1e-7  # relative allowance for tilted tail probabilities
_CACHE: "OrderedDict[bytes, object]" = OrderedDict()
#: The cache of tables, atoms, frames and laws keeps its most recently used entries up to this many bytes of
#: arrays (and at most _CACHE_ENTRIES): a default verifier run computes 264 of about 9 MB in all, and with the
#: former cap of 64 entries it evicted and recomputed some within the run (0.34 s of its CPU) and all of them in a
#: second run in the same process (1.75 s); one atoms entry of a 59-leaf law at n = 5e7 holds ~30 MB. The bytes are
#: those an entry holds when it is stored: a law's tilted pass, computed later, is not counted, and a law's closure
#: keeps its table's atoms and frame alive after their own entries are evicted, so this bounds the cache roughly.
_CACHE_BYTES = 96 << 20
_CACHE_ENTRIES = 4096
_CACHE_SIZES: dict = {}  # key -> bytes of arrays the entry holds
_MEMO_TILTS = 16  # tilt arrays whose K (and K', K'') a leaf-atoms entry keeps: a law asks for 8 distinct ones


def z_terms(N, mu):
    """Unbiased chi-square cell ``((N - mu)^2 - N) / mu`` (Acharya, Daskalakis & Kamath 2015)."""
    N = np.asarray(N, dtype=np.float64)
    return ((N - mu) ** 2 - N) / mu


@dataclass(frozen=True)
class ZTable:
    """Lattice tables of ``S`` (see module docstring); one table per distinct leaf ``(mu, w)``."""

    mu: np.ndarray        # [B] null means
    w: np.ndarray         # [B] weights
    h: float              # lattice step in statistic units
    fmin: np.ndarray      # [B] min_N f_b(N)
    lo: np.ndarray        # [B] first N of the central range (f < TAU)
    offsets: np.ndarray   # [B] start of bin b's table in ``idx`` (bins of one leaf share it)
    lens: np.ndarray      # [B] length of that table
    idx: np.ndarray       # lattice index of the term for N = lo_b + j
    tau_idx: np.ndarray   # [B] index of the truncation atom (N outside the central range)
    leaf_of: np.ndarray   # [B] distinct-leaf id (bins with equal (mu, w) share laws)
    leaf_rep: np.ndarray  # [D] a representative bin per distinct leaf
    key: bytes

    @property
    def nbins(self):
        return len(self.mu)

    def index_of(self, bin_counts):
        """Lattice statistic ``S`` of observed bin counts ``[..., B]`` (integer)."""
        N = np.asarray(bin_counts, dtype=np.int64)
        rel = N - self.lo
        inside = (rel >= 0) & (rel < self.lens)
        if inside.all():  # the common case: one gather
            return self.idx[self.offsets + rel].sum(axis=-1)
        pos = np.where(inside, self.offsets + rel, 0)
        return np.where(inside, self.idx[pos], self.tau_idx).sum(axis=-1)

    def statistic(self, bin_counts):
        """``Z_w = sum_b w_b min(f_b(N_b), TAU)`` (unrounded, for reporting)."""
        return (self.w * np.minimum(z_terms(bin_counts, self.mu), TAU)).sum(axis=-1)


def _central_range(mu):
    """Integer ``[lo, hi]`` where ``f(N) < TAU``: the roots of ``(N - mu)^2 - N = TAU mu``."""
    r = np.sqrt(TAU * mu + mu + 0.25)
    lo = np.maximum(0, np.ceil(mu + 0.5 - r)).astype(np.int64)
    hi = np.floor(mu + 0.5 + r).astype(np.int64)
    # guard against round-off at the roots: shrink until f < TAU holds at both ends
    lo = np.where(z_terms(lo, mu) >= TAU, lo + 1, lo)
    hi = np.where(z_terms(hi, mu) >= TAU, hi - 1, hi)
    return lo, np.maximum(hi, lo)


def _fmin(mu):
    v = np.floor(mu + 0.5)
    cand = np.stack([np.maximum(v - 1, 0), v, v + 1])
    return z_terms(cand, mu).min(axis=0)


def z_table(mu, w, *, h=None):
    """Lattice tables for bins with null means ``mu`` and weights ``w`` (cached)."""
    mu = np.ascontiguousarray(mu, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    key = b"T" + mu.tobytes() + b"|" + w.tobytes() + (b"" if h is None else np.float64(h).tobytes())
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    if h is None:
        h = _step(mu, w)
    _, leaf_rep, leaf_of = np.unique(mu, return_index=True, return_inverse=True)
    leaf_of = leaf_of.ravel()
    if not np.array_equal(w[leaf_rep][leaf_of], w):  # weights not a function of mu: pairs
        pair = np.stack([mu.view(np.int64), w.view(np.int64)], axis=1)
        _, leaf_rep, leaf_of = np.unique(pair, axis=0, return_index=True, return_inverse=True)
        leaf_of = leaf_of.ravel()
    # tables per distinct leaf only (a uniform law on 10^6 cells has one)
    lmu, lw = mu[leaf_rep], w[leaf_rep]
    lfmin = _fmin(lmu)
    llo, lhi = _central_range(lmu)
    llens = lhi - llo + 1
    loff = np.r_[0, np.cumsum(llens)[:-1]]
    leaf = np.repeat(np.arange(len(lmu)), llens)
    N = np.arange(llens.sum()) - np.repeat(loff, llens) + np.repeat(llo, llens)
    t = lw[leaf] * (np.minimum(z_terms(N, lmu[leaf]), TAU) - lfmin[leaf])
    idx = np.floor(t / h + 0.5).astype(np.int64)
    ltau = np.floor(lw * (TAU - lfmin) / h + 0.5).astype(np.int64)
    table = ZTable(mu=mu, w=w, h=float(h), fmin=lfmin[leaf_of], lo=llo[leaf_of], offsets=loff[leaf_of],
                   lens=llens[leaf_of], idx=idx, tau_idx=ltau[leaf_of], leaf_of=leaf_of, leaf_rep=leaf_rep, key=key)
    _remember(key, table)
    return table


def _remember(key, value):
    _CACHE[key] = value
    _CACHE.move_to_end(key)
    _CACHE_SIZES[key] = _array_bytes(value)
    total = sum(_CACHE_SIZES.setdefault(k, 0) for k in _CACHE)  # (an entry cleared from _CACHE no longer counts)
    while len(_CACHE) > 1 and (total > _CACHE_BYTES or len(_CACHE) > _CACHE_ENTRIES):
        old, _ = _CACHE.popitem(last=False)
        total -= _CACHE_SIZES.pop(old, 0)
    if len(_CACHE_SIZES) > 2 * len(_CACHE):
        for stale in [k for k in _CACHE_SIZES if k not in _CACHE]:
            del _CACHE_SIZES[stale]


def _array_bytes(value) -> int:
    """Bytes of the numpy arrays an entry holds in its fields (directly, or in tuples of them)."""
    fields = value.__dict__ if hasattr(value, "__dict__") else {}
    total = 0
    for item in fields.values():
        for array in item if isinstance(item, (tuple, list)) else (item,):
            if isinstance(array, np.ndarray):
                total += array.nbytes
    return total


def _step(mu, w):
    """Lattice step: RES x RMS per-bin sd, coarser only if the root window would exceed W_MAX."""
    sd_bin = w * np.sqrt(2.0)
    h = RES * float(np.sqrt(np.mean(sd_bin ** 2)))
    width = (C_LO + 16.0) * float(np.sqrt(np.sum(sd_bin ** 2))) + UPPER_SLACK * float(w.max())
    return max(h, width / (W_MAX - 64))


# ----------------------------------------------------------------------------------------------
# per-leaf laws and the exact cumulant generating function
# ----------------------------------------------------------------------------------------------

def _pmf(N, mu):
    return np.exp(special.xlogy(N, mu) - mu - special.gammaln(N + 1.0))


@dataclass(frozen=True)
class _Atoms:
    """Exact law of every distinct leaf as sparse atoms ``(leaf, x, p)`` and leaf multiplicities."""

    leaf: np.ndarray
    x: np.ndarray
    p: np.ndarray
    mult: np.ndarray
    width: np.ndarray   # [D] leaf support width (max lattice value + 1)

    @property
    def starts(self) -> np.ndarray:
        """Index of each leaf's first atom (the atoms are grouped by leaf), for ``reduceat``."""
        starts = self.__dict__.get("_starts")
        if starts is None:
            starts = np.flatnonzero(np.r_[True, self.leaf[1:] != self.leaf[:-1]])
            object.__setattr__(self, "_starts", starts)
        return starts

    @property
    def lattice(self):
        """``(x as int64, 0..max x as float64)`` where the atoms take fewer distinct lattice values than there
        are atoms (a law of many leaves), else None: ``e^{theta x}`` is then computed once per value and
        gathered (the same numbers as per atom, at a tenth of the time)."""
        found = self.__dict__.get("_lattice")
        if found is None:
            top = int(self.x.max()) if self.x.size else 0
            whole = self.x.size and self.x.min() >= 0 and np.array_equal(self.x, np.floor(self.x))
            found = ((self.x.astype(np.int64), np.arange(top + 1, dtype=np.float64))
                     if whole and top < self.x.size // 4 else ())
            object.__setattr__(self, "_lattice", found)
        return found or None

    def _tilted(self, th):
        """``p e^{theta x}`` per atom, ``[len(th), atoms]``."""
        lattice = self.lattice
        if lattice is None:
            return self.p[None, :] * np.exp(th[:, None] * self.x[None, :])
        index, values = lattice
        return self.p[None, :] * np.exp(th[:, None] * values[None, :]).take(index, axis=1)

    def _memo(self, name, th):
        """The dict of results already computed for these tilts (keyed by their bytes), and the key: the Chernoff
        searches, a spectral pass's overflow bound and the Chernoff law ask for the same grid (and ``theta = 0``)
        several times per law (4 and 3 times); a repeat costs nothing and gives the very same numbers."""
        memo = self.__dict__.get("_memo_" + name)
        if memo is None:
            memo = {}
            object.__setattr__(self, "_memo_" + name, memo)
        return memo, th.tobytes()

    def log_mgf(self, theta):
        """Exact ``K(theta) = log E e^{theta S}`` alone (theta per lattice unit, array): what the Chernoff
        searches need, at a third of :meth:`cgf`'s work, and the same floating-point value as its ``K``."""
        th = np.atleast_1d(np.asarray(theta, dtype=np.float64))
        memo, key = self._memo("log_mgf", th)
        if key not in memo:
            if len(memo) >= _MEMO_TILTS:
                memo.clear()
            memo[key] = self._log_mgf(th)
        return memo[key].copy()

    def _log_mgf(self, th):
        starts = self.starts
        K = []
        for c in range(0, len(th), 8):  # the chunks of cgf: the same sums in the same order
            e = self._tilted(th[c:c + 8])
            K.append((self.mult * np.log(np.add.reduceat(e, starts, axis=1))).sum(axis=1))
        return np.concatenate(K)

    def cgf(self, theta):
        """Exact ``K(theta) = log E e^{theta S}`` (theta per lattice unit, array) and ``K'``, ``K''``."""
        th = np.atleast_1d(np.asarray(theta, dtype=np.float64))
        memo, key = self._memo("cgf", th)
        if key not in memo:
            if len(memo) >= _MEMO_TILTS:
                memo.clear()
            memo[key] = self._cgf(th)
        return tuple(part.copy() for part in memo[key])

    def _cgf(self, th):
        starts = self.starts
        K, K1, K2 = [], [], []
        for c in range(0, len(th), 8):  # chunks of 8 tilts keep the temporaries small
            e = self._tilted(th[c:c + 8])
            s0 = np.add.reduceat(e, starts, axis=1)
            s1 = np.add.reduceat(e * self.x, starts, axis=1)
            s2 = np.add.reduceat(e * self.x ** 2, starts, axis=1)
            m1 = s1 / s0
            K.append((self.mult * np.log(s0)).sum(axis=1))
            K1.append((self.mult * m1).sum(axis=1))
            K2.append((self.mult * (s2 / s0 - m1 ** 2)).sum(axis=1))
        return np.concatenate(K), np.concatenate(K1), np.concatenate(K2)


def _atoms(table):
    key = b"A" + table.key
    hit = _CACHE.get(key)
    if hit is None:
        hit = _make_atoms(table)
        _remember(key, hit)
    return hit


def _make_atoms(table):
    reps = table.leaf_rep
    a = table.offsets[reps]
    lens = table.lens[reps]
    leaf = np.repeat(np.arange(len(reps)), lens)
    pos = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    N = np.repeat(table.lo[reps], lens) + pos
    mu = table.mu[reps]
    p = _pmf(N, mu[leaf])
    x = table.idx[np.repeat(a, lens) + pos]
    lo, hi = table.lo[reps], table.lo[reps] + lens - 1
    outside = np.where(lo > 0, special.pdtr(np.maximum(lo - 1, 0), mu), 0.0) + special.pdtrc(hi, mu)
    mult = np.bincount(table.leaf_of, minlength=len(reps)).astype(np.float64)
    leaf = np.r_[leaf, np.arange(len(reps))]
    order = np.argsort(leaf, kind="stable")  # atoms grouped by leaf (for reduceat)
    keep = np.r_[p, outside][order] > 0
    return _Atoms(leaf=leaf[order][keep], x=np.r_[x, table.tau_idx[reps]].astype(np.float64)[order][keep],
                  p=np.r_[p, outside][order][keep], mult=mult, width=table.tau_idx[reps] + 1)


def _dense(atoms, leaves, W, theta_h=0.0):
    """Tilted dense laws of ``leaves`` on ``[0, W)`` (positions mod W), normalised per leaf; log-scales."""
    sel = np.isin(atoms.leaf, leaves)
    local = np.searchsorted(leaves, atoms.leaf[sel])
    x = atoms.x[sel].astype(np.int64)
    lw = np.log(atoms.p[sel]) + theta_h * x
    mx = np.full(len(leaves), -np.inf)
    np.maximum.at(mx, local, lw)
    e = np.exp(lw - mx[local])
    tot = np.bincount(local, e, len(leaves))
    ls = mx + np.log(tot)  # normalised to unit sum: spectra have modulus <= 1, so their powers cannot overflow
    arr = np.bincount(local * W + x % W, e / tot[local], len(leaves) * W).reshape(len(leaves), W)
    return arr, ls


def _chernoff_point(atoms, level, theta_max):
    """``min_theta (K(theta) + level) / theta`` and its minimiser: ``P(S >= x) <= e^-level``
    (grid search, then a finer grid between the neighbours of the best point)."""
    grid = np.geomspace(theta_max * 1e-5, theta_max, 32)
    x = (atoms.log_mgf(grid) + level) / grid
    i = int(np.argmin(x))
    fine = np.geomspace(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 17)
    xf = (atoms.log_mgf(fine) + level) / fine
    j = int(np.argmin(xf))
    return float(xf[j]), float(fine[j])


def _log_tail_bound(atoms, s, theta_max):
    """Chernoff ``log P(S >= s) <= min_theta K(theta) - theta s`` on a grid (rigorous)."""
    grid = np.geomspace(theta_max * 1e-5, theta_max, 32)
    return float(np.min(atoms.log_mgf(grid) - grid * s))


@dataclass(frozen=True)
class _Frame:
    """What the passes share: per pass (untilted, tilted) the window ``[lo, lo + W)`` of ``S``; the tilt."""

    lo: tuple
    W: tuple
    theta_h: float
    theta_max: float


def _frame(table, atoms):
    key = b"F" + table.key
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    theta_max = 0.6 * table.h / max(float(table.w.max()), 1e-12)  # per lattice unit (terms are truncated)
    _, theta_h = _chernoff_point(atoms, 20.0, theta_max)  # tilted mean ~ 1e-9 quantile
    x_hi, _ = _chernoff_point(atoms, 45.0, theta_max)                     # P(S >= x_hi) <= e^-45
    los, Ws = [], []
    for th in (0.0, theta_h):
        K, K1, K2 = atoms.cgf(th)
        mean, sd = float(K1[0]), float(np.sqrt(K2[0]))
        # the upper end: untilted e^-45 point; for the tilted law its own e^-20 point
        # (P_theta(S >= x) <= exp(K(theta + phi) - K(theta) - phi x)): tilted mass beyond it or below
        # the start only costs relative accuracy ~e^-20 where the tilted pass is used, never validity
        grid = th + np.geomspace(theta_max * 1e-4, theta_max, 24)
        top = float(np.min((atoms.log_mgf(grid) - K[0] + 20.0) / (grid - th))) if th > 0 else x_hi
        lo = int(max(0.0, np.floor(mean - (C_LO if th == 0 else C_LO_TILTED) * sd)))
        los.append(lo)
        Ws.append(int(np.ceil(max(top, lo + 16) - lo)) + 8)
    frame = _Frame(lo=tuple(los), W=tuple(Ws), theta_h=float(theta_h), theta_max=theta_max)
    _remember(key, frame)
    return frame


# ----------------------------------------------------------------------------------------------
# spectral method (few distinct leaves) -- Poisson and conditional
# ----------------------------------------------------------------------------------------------

SPECTRAL_WORK = 4e7   # use the spectral Poisson law when D * W log W is below this (else the tree)


def _spectral_pass(atoms, lo, W, theta_h, M=None, n=None, n2d=None):
    """Real ``P(S = s[, T = n mod M])`` for ``s`` in ``[lo, lo + W)`` (pass tilted by ``theta_h``)."""
    D = len(atoms.mult)
    leaves = np.arange(D)
    mult = atoms.mult.astype(np.int64)
    if M is None:
        arr, ls = _dense(atoms, leaves, W, theta_h)
        spec = sfft.rfft(arr, W, axis=-1)
        acc = _cpow(spec[0], mult[0])
        for d in range(1, D):
            acc *= _cpow(spec[d], mult[d])
        row = sfft.irfft(acc, W)
    else:
        acc, ls = None, np.empty(D)
        for d in range(D):
            A, ls[d] = _leaf_2d(n2d[d], W, theta_h, M)
            # real 2-d leaf (T mod M, S mod W): rfft along S, fft along T -> half the grid
            f = _cpow(sfft.fft(sfft.rfft(A, axis=1), axis=0, overwrite_x=True), mult[d])
            acc = f if acc is None else acc * f
        j = np.arange(M)
        phase = np.exp(2j * np.pi * ((j * (n % M)) % M) / M)  # inverse DFT in T at T = n
        row = sfft.irfft(phase @ acc / M, W)
    s = lo + np.arange(W)
    with np.errstate(divide="ignore"):
        logp = np.log(np.maximum(row[s % W], 0.0)) + float((atoms.mult * ls).sum()) - theta_h * s
    return np.where(row[s % W] > 0, np.exp(np.minimum(logp, 700.0)), 0.0)


def _cpow(z, m):
    """``z ** m`` for an integer ``m >= 1`` by repeated squaring (|z| <= 1: no overflow); ``z`` is not changed.
    The products are formed in place (the same numbers as ``out * z`` and ``z * z``, without a new array each)."""
    out = None
    z_own = False
    while True:
        if m & 1:
            if out is None:
                out = z.copy()
            else:
                np.multiply(out, z, out=out)
        m >>= 1
        if not m:
            return out
        if z_own:
            np.multiply(z, z, out=z)
        else:
            z, z_own = z * z, True


def _leaf_2d(leaf, W, theta_h, M):
    """A leaf's joint law of ``(N mod M, x(N) mod W)`` as a real ``[M, W]`` array, tilted by
    ``e^{theta h x}`` and normalised to unit sum (so every spectrum has modulus <= 1)."""
    N, x, p = leaf
    with np.errstate(divide="ignore"):  # pmf values that underflow to 0 weigh exp(-inf) = 0, as they should
        lw = np.log(p) + theta_h * x
    ls = float(logsumexp(lw))
    A = np.bincount((N % M) * W + x % W, np.exp(lw - ls), M * W).reshape(M, W)
    return A, ls


def _atoms_2d(table):
    """Per distinct leaf: counts ``N`` over ``[lo2, hi2]`` with lattice values and pmf (for T-phases);
    the Poisson mass outside (< 1e-30) is returned as overflow."""
    n2d, _, over = _atoms_2d_parts(table)
    return n2d, over


def _atoms_2d_parts(table):
    """:func:`_atoms_2d` and each distinct leaf's Poisson mass outside its counts, ``(n2d, outside [D], over)``:
    the ranges, pmfs and tails of every leaf in one pass each (the same numbers as leaf by leaf: elementwise
    functions, and ``over`` summed leaf after leaf as before; issue 31)."""
    reps = table.leaf_rep
    mus = table.mu[reps]
    starts = table.offsets[reps]
    lo = table.lo[reps].astype(np.int64)
    hi = lo + table.lens[reps] - 1
    sd = np.sqrt(mus)
    lo2 = np.minimum(lo, np.maximum(0.0, np.floor(mus - 13.0 * sd - 15.0)).astype(np.int64))
    hi2 = np.maximum(hi, np.ceil(mus + 13.0 * sd + 45.0).astype(np.int64))
    lengths = hi2 - lo2 + 1
    first = np.concatenate([[0], np.cumsum(lengths)])
    counts = np.repeat(lo2, lengths) + (np.arange(first[-1]) - np.repeat(first[:-1], lengths))
    pmf = _pmf(counts, np.repeat(mus, lengths))
    with np.errstate(all="ignore"):  # pdtr(-1, mu) where lo2 = 0: not used
        outside = np.where(lo2 > 0, special.pdtr(lo2 - 1, mus), 0.0) + special.pdtrc(hi2, mus)
    mult = np.bincount(table.leaf_of, minlength=len(reps))
    n2d, over = [], 0.0
    for d, b in enumerate(reps):
        N = counts[first[d]:first[d + 1]]
        x = np.full(len(N), table.tau_idx[b], dtype=np.int64)
        x[lo[d] - lo2[d]: hi[d] - lo2[d] + 1] = table.idx[starts[d]:starts[d] + table.lens[b]]
        n2d.append((N, x, pmf[first[d]:first[d + 1]]))
        over += mult[d] * outside[d]
    return n2d, outside, float(over)


def _spectral_pass_tail(table, atoms, frame, i, M=None, n=None):
    """Pass ``i`` (0 untilted, 1 tilted) of the spectral law: ``(lo, tail, overflow)``."""
    lo, W, th = frame.lo[i], frame.W[i], (0.0, frame.theta_h)[i]
    extra, n2d = 0.0, None
    if M is not None:
        n2d, extra = _atoms_2d(table)
    W = int(sfft.next_fast_len(W, real=True))
    # mass above the window wraps down and is lost from the tails: bound it (Chernoff), add it
    ovf = float(np.exp(min(0.0, _log_tail_bound(atoms, lo + W, frame.theta_max)))) + extra
    p = _spectral_pass(atoms, lo, W, th, M, n, n2d)
    if not np.all(np.isfinite(p)):
        raise FloatingPointError("non-finite lattice law")
    return lo, np.cumsum(p[::-1])[::-1] + ovf, ovf


# ----------------------------------------------------------------------------------------------
# windowed pairwise tree (many distinct leaves; Poisson law only)
# ----------------------------------------------------------------------------------------------

def _plan(ids):
    """Per level, the unique pairs of node ids to convolve (equal nodes are convolved once)."""
    ids = np.sort(ids)
    levels = []
    while len(ids) > 1:
        m = len(ids) // 2
        a, b = ids[0:2 * m:2], ids[1:2 * m:2]
        key = a.astype(np.int64) * (int(ids.max()) + 1) + b
        uk, first, inv = np.unique(key, return_index=True, return_inverse=True)
        carry = int(ids[-1]) if len(ids) % 2 else None
        levels.append((a[first], b[first], carry))
        nxt = inv.ravel()
        if carry is not None:
            nxt = np.r_[nxt, len(uk)]  # the carried node becomes row len(uk) of the next level
        ids = np.sort(nxt)
    return levels


def _tree(arr, ls, lo, ovf, mean, var, levels, theta_h, wmax):
    """Run the tree on ``arr [rows, W]`` (normalised, log-scales ``ls``, offsets ``lo``, real overflow
    ``ovf``, node mean/var in lattice units under the pass measure).  Returns the root."""
    for pa, pb, carry in levels:
        W = arr.shape[-1]
        L = 2 * W - 1
        nfft = sfft.next_fast_len(L, real=True)
        c = sfft.irfft(sfft.rfft(arr[pa], nfft, axis=-1) * sfft.rfft(arr[pb], nfft, axis=-1), nfft, axis=-1)[:, :L]
        np.maximum(c, 0.0, out=c)
        nls, nlo, novf = ls[pa] + ls[pb], lo[pa] + lo[pb], ovf[pa] + ovf[pb]
        nmean, nvar = mean[pa] + mean[pb], var[pa] + var[pb]
        Wn = min(L, wmax)
        if Wn < L:
            c, nlo, extra = _window(c, nlo, nls, nmean, nvar, Wn, theta_h)
            novf = novf + extra
        mx = c.max(axis=-1)
        mx[mx == 0] = 1.0
        c /= mx[:, None]
        nls = nls + np.log(mx)
        if carry is not None:
            cc = np.zeros((1, Wn))
            cc[0, :W] = arr[carry]
            c = np.concatenate([c, cc], axis=0)
            nls, nlo = np.r_[nls, ls[carry]], np.r_[nlo, lo[carry]]
            novf, nmean, nvar = np.r_[novf, ovf[carry]], np.r_[nmean, mean[carry]], np.r_[nvar, var[carry]]
        arr, ls, lo, ovf, mean, var = c, nls, nlo, novf, nmean, nvar
    return arr[0], float(ls[0]), int(lo[0]), float(ovf[0])


def _window(c, lo_nat, ls, mean, var, Wn, theta_h):
    """Keep ``[lo', lo' + Wn)`` per row, ``lo' = max(lo_nat, mean - C_LO sd)``: the mass below is moved
    up to ``lo'`` (conservative), the real mass above is returned as overflow."""
    U, L = c.shape
    shift = np.clip(np.floor(mean - C_LO * np.sqrt(var)).astype(np.int64) - lo_nat, 0, L - Wn)
    out = np.take_along_axis(c, shift[:, None] + np.arange(Wn)[None, :], axis=1)
    extra = np.zeros(U)
    if theta_h == 0.0:
        cum = np.concatenate([np.zeros((U, 1)), np.cumsum(c, axis=1)], axis=1)
        out[:, 0] += cum[np.arange(U), shift]
        extra = (cum[:, -1] - cum[np.arange(U), shift + Wn]) * np.exp(ls)
        return out, lo_nat + shift, np.maximum(extra, 0.0)
    x = np.arange(L)
    for r in range(U):
        s = int(shift[r])
        with np.errstate(divide="ignore"):
            if s > 0:
                # real mass at lo_nat + x moved up to lo_nat + s: tilted value times e^{theta h (s - x)}
                lm = np.log(c[r, :s]) + theta_h * (s - x[:s])
                if lm.max() < 700.0:
                    out[r, 0] += np.exp(lm).sum()
                else:  # not representable: count the real mass as rejection instead (conservative)
                    extra[r] += np.exp(logsumexp(np.log(c[r, :s]) + ls[r] - theta_h * (lo_nat[r] + x[:s])))
            if s + Wn < L:
                xs = x[s + Wn:]
                extra[r] += np.exp(logsumexp(np.log(c[r, s + Wn:]) + ls[r] - theta_h * (lo_nat[r] + xs)))
    return out, lo_nat + shift, np.nan_to_num(extra, nan=0.0)


def _tree_pass_tail(table, atoms, frame, i):
    """Pass ``i`` of the Poisson law by the bucketed tree (leaves of similar width convolved first)."""
    Wp, th = frame.W[i], (0.0, frame.theta_h)[i]
    wmax = int(sfft.next_fast_len(Wp, real=True))
    bucket = np.ceil(np.log2(np.maximum(atoms.width, 2))).astype(np.int64)
    roots = []
    for b in np.unique(bucket):
        leaves = np.flatnonzero(bucket == b)
        Wb = int(atoms.width[leaves].max())
        arr, ls = _dense(atoms, leaves, Wb, th)
        x = np.arange(Wb)
        m = (arr * x).sum(axis=1)
        v = (arr * x ** 2).sum(axis=1) - m ** 2
        ids = np.repeat(np.arange(len(leaves)), atoms.mult[leaves].astype(np.int64))
        root = _tree(arr, ls, np.zeros(len(leaves), dtype=np.int64), np.zeros(len(leaves)), m, v,
                     _plan(ids), th, wmax)
        mult = atoms.mult[leaves]
        roots.append(root + (float((mult * m).sum()), float((mult * v).sum())))
    Wr = max(len(r[0]) for r in roots)
    arr = np.zeros((len(roots), Wr))
    for j, r in enumerate(roots):
        arr[j, :len(r[0])] = r[0]
    col = [np.array([r[c] for r in roots]) for c in range(1, 6)]
    a, rls, rlo, rovf = _tree(arr, *col, _plan(np.arange(len(roots))), th, wmax)
    x = np.arange(len(a))
    with np.errstate(divide="ignore"):
        logp = np.log(np.maximum(a, 0.0)) + rls - th * (rlo + x)
    p = np.where(a > 0, np.exp(np.minimum(logp, 700.0)), 0.0)
    if not np.all(np.isfinite(p)):
        raise FloatingPointError("non-finite lattice law")
    return rlo, np.cumsum(p[::-1])[::-1] + rovf, rovf


# ----------------------------------------------------------------------------------------------
# laws
# ----------------------------------------------------------------------------------------------

class LatticeTail:
    """Upper bound on ``P(S >= s)`` (Poisson) or ``P(S >= s | T = n)`` (multinomial).

    The untilted pass is computed at once; the tilted one (needed only below 1e-9)
    on first use, then checked against the untilted pass where both are accurate.
    """

    def __init__(self, untilted, tilted_fn, divisor, theta, method):
        self.lo0, self.tail0, self.ovf0 = untilted
        self._tilted_fn = tilted_fn
        self._tilted = None
        self.divisor, self.theta, self.method = float(divisor), float(theta), method

    def _pass1(self):
        if self._tilted is None:
            lo1, tail1, ovf1 = self._tilted_fn() if self.theta > 0 else (self.lo0, None, self.ovf0)
            sound = tail1 is not None
            if sound:
                # self-check where both passes are accurate; if they disagree, never use the tilted
                # pass (fall back to the absolute-error bound: conservative)
                a0, a1 = max(self.lo0, lo1), min(self.lo0 + len(self.tail0), lo1 + len(tail1))
                if a1 > a0:
                    t0 = self.tail0[a0 - self.lo0:a1 - self.lo0]
                    t1 = tail1[a0 - lo1:a1 - lo1]
                    d = self.divisor
                    both = (t0 >= 1e-9 * d) & (t0 <= 1e-6 * d)
                    if np.any(both) and np.any(np.abs(t1[both] - t0[both]) > 1e-4 * t0[both] + 1e-11 * d):
                        sound = False
            if not sound:
                lo1, tail1, ovf1 = self.lo0, np.full(1, np.inf), self.ovf0
            self._tilted = (lo1, tail1, ovf1, sound)
        return self._tilted

    @property
    def overflow(self):
        """Real mass counted as rejection (from the tilted pass when sound: the untilted pass's is
        mostly FFT noise)."""
        lo1, tail1, ovf1, sound = self._pass1()
        return ovf1 if sound else self.ovf0

    def _untilted(self, s):
        i0 = s - self.lo0
        t0 = np.where(i0 < 0, np.inf, self.tail0[np.clip(i0, 0, len(self.tail0) - 1)])
        return np.where(i0 >= len(self.tail0), self.ovf0, t0)

    def sf(self, s):
        """Valid upper bound on ``P(S >= s)``, vectorised over integer ``s``."""
        s = np.asarray(s, dtype=np.int64)
        t0 = self._untilted(s)
        d = self.divisor
        easy = t0 >= 1e-9 * d
        if np.all(easy):
            return np.minimum((t0 + FFT_ABS_ERR) / d, 1.0)
        lo1, tail1, ovf1, sound = self._pass1()
        ovf = ovf1 if sound else self.ovf0
        t0 = t0 - self.ovf0 + ovf  # the untilted pass with the better overflow mass
        i1 = s - lo1
        t1 = np.where(i1 < 0, np.inf, tail1[np.clip(i1, 0, len(tail1) - 1)])
        t1 = np.where(i1 >= len(tail1), ovf, t1)
        tilted = np.minimum(t0 + FFT_ABS_ERR, t1 * (1 + TILT_REL_ERR) + 1e-300)
        out = np.where(easy, t0 + FFT_ABS_ERR, tilted)
        out = np.maximum(out, ovf) / d
        return np.minimum(out, 1.0)

    def isf(self, alpha):
        """Smallest lattice value ``s`` with ``sf(s) <= alpha`` (the rejection threshold)."""
        lo = self.lo0
        hi = self.lo0 + len(self.tail0)
        if alpha < 1e-9:
            lo1, tail1, _, _ = self._pass1()
            hi = max(hi, lo1 + len(tail1))
        s = np.arange(lo, hi + 1)
        ok = np.flatnonzero(self.sf(s) <= alpha)
        return int(s[ok[0]]) if len(ok) else hi + 1


def poisson_law(table):
    """Exact (conservative) lattice law of ``S`` under independent Poisson bins (cached)."""
    key = b"P" + table.key
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    atoms = _atoms(table)
    frame = _frame(table, atoms)
    W = int(sfft.next_fast_len(max(frame.W), real=True))
    if len(atoms.mult) * W * np.log2(W) <= SPECTRAL_WORK:
        run, method = (lambda i: _spectral_pass_tail(table, atoms, frame, i)), "spectral"
    else:
        run, method = (lambda i: _tree_pass_tail(table, atoms, frame, i)), "tree"
    law = LatticeTail(run(0), lambda: run(1), 1.0, frame.theta_h / table.h, method)
    _remember(key, law)
    return law


def null_mean(table):
    """Exact mean of the lattice statistic ``S`` under the Poisson null (lattice units)."""
    return float(_atoms(table).cgf(0.0)[1][0])


def _n_freq(n):
    # aliased rows T = n +- M weigh P(T = n +- M) / P(T = n) ~ exp(-M^2 / 2n) = e^-40
    return int(sfft.next_fast_len(int(np.ceil(9.0 * np.sqrt(n) + 16)), real=False))


def conditional_cost(table, n):
    """Work (points x log2) of the untilted pass of :func:`conditional_law`, ``D x M x W log2 W``
    (the tilted pass, ~3x more, runs only when a tail below 1e-9 is asked for)."""
    atoms = _atoms(table)
    frame = _frame(table, atoms)
    W = int(sfft.next_fast_len(frame.W[0], real=True))
    return float(len(atoms.mult) * _n_freq(n) * W * np.log2(W))


def conditional_law(table, n):
    """Exact (conservative) lattice law of ``S`` given ``T = n`` (fixed-n multinomial), cached.

    ``P(S >= s | T = n) <= P(S >= s, T = n mod M) / P(T = n)`` with the joint law
    computed spectrally in both ``S`` and ``T`` (see module docstring).
    """
    key = b"C" + table.key + np.int64(n).tobytes()
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    atoms = _atoms(table)
    frame = _frame(table, atoms)
    p_n = poisson_pmf(n, float(table.mu.sum()))
    M = _n_freq(n)

    def run(i):
        return _spectral_pass_tail(table, atoms, frame, i, M=M, n=int(n))

    law = LatticeTail(run(0), lambda: run(1), p_n, frame.theta_h / table.h, "conditional")
    _remember(key, law)
    return law


# ----------------------------------------------------------------------------------------------
# Chernoff bound on the conditional law (many bins, large n)
# ----------------------------------------------------------------------------------------------

CHERNOFF_TILTS = 24  # tilts of the Chernoff grid (the bound is the minimum over them; ratio ~1.17)


class BoundedTail:
    """``min(Poisson tail / P(T = n), Chernoff bound of the conditional tail)``: both are valid upper
    bounds of the same conditional tail ``P(S >= s | T = n)``, so their minimum is one too."""

    def __init__(self, poisson, divisor, theta, logU):
        self.poisson, self.divisor = poisson, float(divisor)
        self.theta, self.logU = np.asarray(theta), np.asarray(logU)
        self.method = "chernoff"

    def chernoff_sf(self, s):
        s = np.asarray(s, dtype=np.float64)
        lb = (self.logU[None, :] - self.theta[None, :] * np.ravel(s)[:, None]).min(axis=1)
        return np.minimum(1.0, np.exp(np.minimum(lb - np.log(self.divisor), 0.0))).reshape(np.shape(s))

    def sf(self, s):
        return np.minimum(self.poisson.sf(s) / self.divisor, self.chernoff_sf(s))

    def isf(self, alpha):
        s_c = int(np.ceil(np.min((self.logU - np.log(alpha * self.divisor)) / self.theta)))
        return min(s_c, self.poisson.isf(alpha * self.divisor))


def chernoff_cost(table, n):
    """Work of :func:`chernoff_conditional_law`: ``CHERNOFF_TILTS x D x M log2 M``."""
    M = _n_freq(n)
    return CHERNOFF_TILTS * len(table.leaf_rep) * M * np.log2(M)


def _tilted_total_probs(n2d, ls, theta, mult, M, n):
    """``P(T = n mod M)`` under each tilt, every count enumerated (:func:`chernoff_conditional_law`): each leaf's
    tilted pmf (normalised by its log-sum ``ls``) placed at ``N mod M`` and Fourier transformed, the transforms
    raised to the leaf multiplicities and multiplied, the product inverted at ``n``.

    Only the non-negative frequencies are transformed and multiplied: the transform of a real array is these and
    their conjugates (scipy's fft of real input is this rfft with the rest filled in as conjugates), and products
    and powers of conjugates are the conjugates of the products and powers (IEEE negation is exact), so the
    spectrum is filled in at the end: the same numbers for half the work (issue 31)."""
    G = len(theta)
    acc = None
    for d, (N, x, p) in enumerate(n2d):
        with np.errstate(divide="ignore"):  # underflowed pmf values: weight exp(-inf) = 0
            lw = np.log(p)[None, :] + theta[:, None] * x[None, :]
        w = np.exp(lw - ls[d][:, None])
        if len(N) <= M:  # consecutive counts fall on distinct places mod M: placed, not summed (the same numbers)
            arr = np.zeros((G, M))
            arr[:, N % M] = w
        else:
            arr = np.bincount((np.arange(G)[:, None] * M + (N % M)[None, :]).ravel(), w.ravel(), G * M).reshape(G, M)
        f = _cpow(sfft.rfft(arr, axis=1), mult[d])
        acc = f if acc is None else acc * f
    half = acc.shape[1]
    spectrum = np.empty((G, M), dtype=acc.dtype)
    spectrum[:, :half] = acc
    spectrum[:, half:] = np.conj(acc[:, 1:M - half + 1][:, ::-1])  # frequency M - j is the conjugate of j
    j = np.arange(M)
    phase = np.exp(2j * np.pi * ((j * (n % M)) % M) / M)
    return (spectrum @ phase).real / M


def chernoff_conditional_law(table, n):
    """Conditional tail bound for fixed-n counts when the exact conditional law is too costly (cached).

    For every tilt ``theta`` on a grid, ``U(theta) = E[e^{theta S}; T = n mod M]`` under
    independent Poisson bins is computed exactly: each distinct leaf's weights
    ``pmf(N) e^{theta x(N)}`` are placed at ``N mod M`` and Fourier transformed, the
    transforms raised to the leaf multiplicities and multiplied, and the result
    inverted at ``T = n``.  Aliased totals ``n +- M, ...`` only add (nonnegative)
    mass, so ``U`` bounds ``E[e^{theta S} 1{T = n}]`` from above; Poisson mass outside
    the enumerated counts is added as ``e^{theta x_max}`` times its probability.
    Markov's inequality then gives ``P(S >= s | T = n) <= e^{-theta s} U / P(T = n)``.
    """
    key = b"X" + table.key + np.int64(n).tobytes()
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    atoms = _atoms(table)
    frame = _frame(table, atoms)
    M = _n_freq(n)
    p_n = poisson_pmf(n, float(table.mu.sum()))
    n2d, outside, _ = _atoms_2d_parts(table)
    mult = atoms.mult.astype(np.int64)
    # tilts theta sd from 0.3 to 12 (tails ~0.9 down to ~1e-30), capped where the terms' truncation ends it
    sd = float(np.sqrt(atoms.cgf(0.0)[2][0]))
    theta = np.geomspace(min(0.3 / sd, 0.5 * frame.theta_max), min(12.0 / sd, frame.theta_max), CHERNOFF_TILTS)
    D = len(n2d)
    ls = np.zeros((D, len(theta)))    # log sum over enumerated counts of pmf e^{theta x}
    lE = np.zeros((D, len(theta)))    # log E e^{theta x} including the counts outside
    lq = np.full(D, -np.inf)          # log Poisson mass outside the enumerated counts
    for d, (N, x, p) in enumerate(n2d):
        with np.errstate(divide="ignore"):  # underflowed pmf values: weight exp(-inf) = 0
            lw = np.log(p)[None, :] + theta[:, None] * x[None, :]
        ls[d] = logsumexp(lw, axis=1)
        b = table.leaf_rep[d]
        out = outside[d]  # the leaf's Poisson mass below and above its counts
        if out > 0:
            lq[d] = np.log(out)
        lE[d] = np.logaddexp(ls[d], lq[d] + theta * table.tau_idx[b])
    val = _tilted_total_probs(n2d, ls, theta, mult, M, n)  # tilted P(T = n mod M), every count enumerated
    log_in = (mult[:, None] * ls).sum(axis=0) + np.log(np.maximum(val, 1e-300))
    # configurations with some count outside: union bound over bins, T unknown (counted whole)
    logK = (mult[:, None] * lE).sum(axis=0)
    with np.errstate(divide="ignore"):
        log_out = logsumexp(np.log(mult)[:, None] + lq[:, None] + theta[None, :] * table.tau_idx[table.leaf_rep][:, None]
                                    + logK[None, :] - lE, axis=0)
    logU = np.logaddexp(log_in, log_out)
    law = BoundedTail(poisson_law(table), p_n, theta, logU)
    _remember(key, law)
    return law
