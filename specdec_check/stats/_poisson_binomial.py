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


def poisson_binomial_pmf(success_probs, *, return_bound=False):
    """Exact pmf of ``sum_i Bernoulli(success_probs[i])``.

    Chunks of 16 probabilities by the exact recursion
    ``P_j(s) = P_{j-1}(s)(1 - p_j) + P_{j-1}(s-1) p_j`` (vectorised across chunks),
    then a pairwise tree of FFT convolutions (the "DC-FFT" method of Biscarri, Zhao
    & Brunner 2018, CSDA 122).  Each partial sum of ``m`` Bernoullis is kept on the
    window ``mean +- sqrt(m ln(2/1e-40) / 2)``; by Hoeffding's inequality (1963) the
    mass dropped per node is <= 1e-40, and the total drop bound is returned with
    ``return_bound=True`` (as ``(pmf, bound, used_fft)``).  10^6 probabilities in
    well under a second.
    """
    p = np.asarray(success_probs, dtype=np.float64)
    n = len(p)
    if n == 0:
        out = np.ones(1)
        return (out, 0.0, False) if return_bound else out
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
    out = np.zeros(n + 1 + a.shape[1])
    out[off[0] : off[0] + a.shape[1]] = a[0]
    out = out[: n + 1]
    out /= out.sum()
    return (out, dropped, used_fft) if return_bound else out


def _poisson_binomial_test_iv(successes, success_probs, alpha, alternative):
    p = np.asarray(success_probs, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"`success_probs` must be 1-dimensional; got shape {p.shape}.")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("`success_probs` must be finite probabilities in [0, 1].")
    if isinstance(successes, bool) or not float(successes).is_integer():
        raise ValueError(f"`successes` must be an integer; got {successes!r}.")
    successes = int(successes)
    if not 0 <= successes <= len(p):
        raise ValueError(f"`successes` must be between 0 and len(success_probs) = {len(p)}; got {successes}.")
    alpha = _alpha_iv(alpha)
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"`alternative` must be 'two-sided', 'greater' or 'less'; got {alternative!r}.")
    return successes, p, alpha, alternative


def poisson_binomial_test(successes, success_probs, *, alpha, alternative="two-sided"):
    """Exact test that ``successes`` is a draw of ``sum_i Bernoulli(success_probs[i])``.

    The exact pmf comes from :func:`poisson_binomial_pmf`.  ``greater``:
    ``P(S >= s)``; ``less``: ``P(S <= s)``; ``two-sided``: total probability of
    outcomes no more likely than the observed one (the "minlike" rule of
    ``scipy.stats.binomtest``, relative tolerance 1e-7).  When FFT merging was used
    an allowance of 1e-13 is added to the p-value for round-off, plus the Hoeffding
    bound on the mass dropped by windowing.
    """
    s, p, alpha, alternative = _poisson_binomial_test_iv(successes, success_probs, alpha, alternative)
    pmf, dropped, used_fft = poisson_binomial_pmf(p, return_bound=True)
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
    return PoissonBinomialResult(statistic=s, pvalue=pvalue, alpha=alpha, n=len(p),
                                 expected=float(p.sum()), method=method, alternative=alternative)
