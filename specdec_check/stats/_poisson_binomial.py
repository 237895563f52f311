"""Exact test of a sum of independent Bernoulli variables with known probabilities."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft

from ._results import TestResultMixin
from ._validation import _alpha_iv

__all__ = ["PoissonBinomialResult", "poisson_binomial_test", "poisson_binomial_pmf"]

_CHUNK = 16
_HOEFFDING_TAU = 1e-40
FFT_ABS_ERR = 1e-13  # allowance for FFT round-off in merged pmfs (added to p-values)


@dataclass(frozen=True)
class PoissonBinomialResult(TestResultMixin):
    """Result of :func:`poisson_binomial_test` (``statistic`` = number of successes)."""

    statistic: int
    pvalue: float
    alpha: float
    n: int
    expected: float
    method: str
    alternative: str = "two-sided"



def _rewindow(a, off, mean, width, t):
    """Re-window rows of ``a`` (row i covers values off[i] ...) to ``width`` around mean - t."""
    R, L = a.shape
    if width >= L:
        return np.pad(a, ((0, 0), (0, width - L))), off
    start = np.clip(np.floor(mean - t).astype(np.int64), off, off + L - width)
    cols = (start - off)[:, None] + np.arange(width)[None, :]
    return np.take_along_axis(a, cols, axis=1), start


def poisson_binomial_pmf(success_probs, *, repeats=None, return_bound=False):
    """Exact pmf of ``sum_i Bernoulli(success_probs[i])``.

    Chunks of 16 probabilities by the exact recursion
    ``P_j(s) = P_{j-1}(s)(1 - p_j) + P_{j-1}(s-1) p_j`` (vectorised across chunks),
    then a pairwise tree of FFT convolutions (the "DC-FFT" method of Biscarri, Zhao
    & Brunner 2018, CSDA 122).  Each partial sum of ``m`` Bernoullis is kept on the
    window ``mean +- sqrt(m ln(2/1e-40) / 2)``; by Hoeffding's inequality (1963) the
    mass dropped per node is <= 1e-40, and the total drop bound is returned with
    ``return_bound=True`` (as ``(pmf, bound, used_fft)``).  10^6 probabilities in
    well under a second.

    ``repeats`` (int >= 1, or one int per probability) counts independent copies of each
    Bernoulli: the pmf of each group of equal repeats is raised to that convolution power
    by squaring, on the same Hoeffding windows, so ``R`` copies of ``n`` probabilities
    cost about as much as ``n``.
    """
    if repeats is not None:
        return _repeated_pmf(success_probs, repeats, return_bound)
    p = np.asarray(success_probs, dtype=np.float64)
    n = len(p)
    if n == 0:
        out = np.ones(1)
        return (out, 0.0, False) if return_bound else out
    window, off, dropped, used_fft = _pmf_window(p)
    out = np.zeros(n + 1 + window.size)
    out[off: off + window.size] = window
    out = out[: n + 1]
    out /= out.sum()
    return (out, dropped, used_fft) if return_bound else out


def _pmf_window(p):
    """The DC-FFT pmf of :func:`poisson_binomial_pmf` on its final window: ``(values, offset, dropped, used_fft)``."""
    n = len(p)
    nchunk = -(-n // _CHUNK)
    pp = np.zeros(nchunk * _CHUNK)
    pp[:n] = p
    pp = pp.reshape(nchunk, _CHUNK)
    at = np.zeros((_CHUNK + 1, nchunk))  # transposed: contiguous rows per count value
    at[0] = 1.0
    ppt = np.ascontiguousarray(pp.T)
    for j in range(_CHUNK):
        pj = ppt[j]
        qj = 1.0 - pj
        at[1 : j + 2] = at[1 : j + 2] * qj + at[: j + 1] * pj
        at[0] *= qj
    a = np.ascontiguousarray(at.T)
    off = np.zeros(nchunk, dtype=np.int64)
    mean = pp.sum(axis=1)
    m = np.full(nchunk, _CHUNK)
    used_fft = nchunk > 1
    dropped = 0.0
    log_term = np.log(2.0 / _HOEFFDING_TAU) / 2.0
    while a.shape[0] > 1:
        carry = None
        if a.shape[0] % 2:
            carry = (a[-1:], off[-1:], mean[-1:], m[-1:])
            a, off, mean, m = a[:-1], off[:-1], mean[:-1], m[:-1]
        L = a.shape[1]
        size = 2 * L - 1
        nfft = sfft.next_fast_len(size, real=True)
        c = sfft.irfft(sfft.rfft(a[0::2], nfft, axis=1) * sfft.rfft(a[1::2], nfft, axis=1), nfft, axis=1)[:, :size]
        np.maximum(c, 0.0, out=c)
        off = off[0::2] + off[1::2]
        mean = mean[0::2] + mean[1::2]
        m = m[0::2] + m[1::2]
        t = float(np.ceil(np.sqrt(m.max() * log_term)))
        width = int(min(size, 2 * t + 2))
        if width < size:
            dropped += _HOEFFDING_TAU * len(m)
        a, off = _rewindow(c, off, mean, width, t)
        if carry is not None:
            ca, coff = _rewindow(carry[0], carry[1], carry[2], width, t)
            if width < carry[0].shape[1]:
                dropped += _HOEFFDING_TAU
            a = np.vstack([a, ca])
            off = np.r_[off, coff]
            mean = np.r_[mean, carry[2]]
            m = np.r_[m, carry[3]]
    return a[0], int(off[0]), dropped, used_fft


def _convolve_windows(x, y):
    """Convolve two windowed pmfs ``(values, offset, m, mean)`` and re-window the result
    to ``mean +- sqrt(m ln(2/tau) / 2)`` (Hoeffding 1963); returns it and the mass bound dropped."""
    a, off_a, m_a, mean_a = x
    b, off_b, m_b, mean_b = y
    size = a.size + b.size - 1
    nfft = sfft.next_fast_len(size, real=True)
    c = sfft.irfft(sfft.rfft(a, nfft) * sfft.rfft(b, nfft), nfft)[:size]
    np.maximum(c, 0.0, out=c)
    off, m, mean = off_a + off_b, m_a + m_b, mean_a + mean_b
    t = float(np.ceil(np.sqrt(m * np.log(2.0 / _HOEFFDING_TAU) / 2.0)))
    width = int(min(size, 2 * t + 2))
    if width >= size:
        return (c, off, m, mean), 0.0
    start = int(np.clip(np.floor(mean - t), off, off + size - width))
    return (c[start - off: start - off + width], start, m, mean), _HOEFFDING_TAU


def _repeated_pmf(success_probs, repeats, return_bound):
    p = np.asarray(success_probs, dtype=np.float64)
    reps = np.broadcast_to(np.asarray(repeats), p.shape)
    if not np.issubdtype(reps.dtype, np.integer) or (reps.size and reps.min() < 1):
        raise ValueError("`repeats` must be an int >= 1 or one such int per probability.")
    total_n = int(reps.sum())
    if total_n == 0:
        return (np.ones(1), 0.0, False) if return_bound else np.ones(1)
    dropped, result = 0.0, None
    for r in np.unique(reps):
        group = p[reps == r]
        window, off, d, _ = _pmf_window(group)
        dropped += d
        base = (window, off, group.size, float(group.sum()))
        r = int(r)
        while r:  # binary exponentiation: base^(*r), convolved into the result
            if r & 1:
                if result is None:
                    result = base
                else:
                    result, d = _convolve_windows(result, base)
                    dropped += d
            r >>= 1
            if r:
                base, d = _convolve_windows(base, base)
                dropped += d
    values, off = result[0], result[1]
    out = np.zeros(total_n + 1 + values.size)
    out[off: off + values.size] = values
    out = out[: total_n + 1]
    out /= out.sum()
    return (out, dropped, True) if return_bound else out


def _poisson_binomial_test_iv(successes, success_probs, alpha, alternative, repeats=None):
    p = np.asarray(success_probs, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"`success_probs` must be 1-dimensional; got shape {p.shape}.")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("`success_probs` must be finite probabilities in [0, 1].")
    if isinstance(successes, bool) or not float(successes).is_integer():
        raise ValueError(f"`successes` must be an integer; got {successes!r}.")
    successes = int(successes)
    if repeats is not None:
        reps = np.asarray(repeats)
        if not np.issubdtype(reps.dtype, np.integer) or reps.ndim > 1 or (reps.ndim == 1 and reps.shape != p.shape) \
                or (reps.size and reps.min() < 1):
            raise ValueError("`repeats` must be an int >= 1 or a 1-d int array (>= 1) with one entry per probability.")
    total = len(p) if repeats is None else int(np.broadcast_to(repeats, p.shape).sum())
    if not 0 <= successes <= total:
        raise ValueError(f"`successes` must be between 0 and the number of trials {total}; got {successes}.")
    alpha = _alpha_iv(alpha)
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"`alternative` must be 'two-sided', 'greater' or 'less'; got {alternative!r}.")
    return successes, p, alpha, alternative


def poisson_binomial_test(successes, success_probs, *, alpha, alternative="two-sided", repeats=None):
    """Exact test that ``successes`` is a draw of ``sum_i Bernoulli(success_probs[i])``.

    The exact pmf comes from :func:`poisson_binomial_pmf`.  ``greater``:
    ``P(S >= s)``; ``less``: ``P(S <= s)``; ``two-sided``: total probability of
    outcomes no more likely than the observed one (the "minlike" rule of
    ``scipy.stats.binomtest``, relative tolerance 1e-7).  When FFT merging was used
    an allowance of 1e-13 is added to the p-value for round-off, plus the Hoeffding
    bound on the mass dropped by windowing. ``repeats`` (see :func:`poisson_binomial_pmf`)
    counts independent copies of each Bernoulli.
    """
    s, p, alpha, alternative = _poisson_binomial_test_iv(successes, success_probs, alpha, alternative, repeats)
    pmf, dropped, used_fft = poisson_binomial_pmf(p, repeats=repeats, return_bound=True)
    err = (FFT_ABS_ERR if used_fft else 0.0) + dropped
    if alternative == "greater":
        pv = pmf[s:].sum()
    elif alternative == "less":
        pv = pmf[: s + 1].sum()
    else:
        d = pmf[s]
        pv = pmf[pmf <= d * (1 + 1e-7)].sum()
    pvalue = float(min(1.0, pv + err))
    method = "exact Poisson-binomial (" + ("chunked recursion + FFT tree" if used_fft else "recursion") + ")"
    counts = np.ones(p.size) if repeats is None else np.broadcast_to(repeats, p.shape)
    return PoissonBinomialResult(statistic=s, pvalue=pvalue, alpha=alpha, n=int(counts.sum()),
                                 expected=float(p @ counts), method=method, alternative=alternative)
