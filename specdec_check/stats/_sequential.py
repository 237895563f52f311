"""Anytime-valid sequential identity test: Dirichlet-multinomial mixture e-process."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from ._results import to_builtin
from ._pooling import DEFAULT_MIN_EXPECTED, pool
from ._special import logsumexp
from ._validation import _alpha_iv, _counts_iv, _positive_int_iv, _probs_iv

__all__ = ["SequentialIdentityTest", "SequentialTestResult", "dm_log_evalues", "concentrations_for"]

DEFAULT_CONCENTRATIONS = tuple(float(a) for a in np.geomspace(10.0, 1e6, 11))
MIN_MASS = 1e-6  # without n_max, outcomes below this probability are grouped (bins of mass ~1e-6):
                 # a Dirichlet(A p) mixture gains nothing on cells with A p << 1 at the useful A


def concentrations_for(nbins, min_tv=None):
    """Grid of Dirichlet concentrations: half-decades from 10 to ``max(1e6, 1e4 B, B / (4 min_tv^2))``.

    The mixture's log e-value is, to second order, ``(n Z + n) / (2A)`` with ``Z`` the
    unbiased chi-square (expand ``lnGamma(A p + N) - lnGamma(A p)`` for large ``A p``),
    so detecting ``TV = eps`` on ``B`` equal bins needs ``A ~ B / (4 eps^2)``: the grid
    reaches ``eps = 0.005``, and ``min_tv`` (a target resolution below it) when given.
    For ``B <= 100`` and no ``min_tv`` it is ``DEFAULT_CONCENTRATIONS``.
    """
    top = max(1e6, 1e4 * float(nbins))
    if min_tv is not None:
        min_tv = float(min_tv)
        if not 0.0 < min_tv < 1.0:
            raise ValueError(f"`min_tv` must lie in (0, 1); got {min_tv!r}.")
        top = max(top, float(nbins) / (4.0 * min_tv**2))
    m = int(round(2 * np.log10(top / 10.0))) + 1
    return tuple(float(a) for a in np.geomspace(10.0, top, m))


def dm_log_evalues(bin_counts, bin_probs, concentrations):
    """Log e-values of the Dirichlet(A p)-multinomial mixture, per A (last axis).

    Lindon & Malek 2022 ("Anytime-valid inference for multinomial count data",
    NeurIPS), closed form on cumulative counts ``N`` with total ``n``:
    ``log E_A = lnG(A) - lnG(A + n) + sum_i [lnG(A p_i + N_i) - lnG(A p_i)] - sum_i N_i ln p_i``.
    ``bin_counts`` may be 2-d ``[runs, bins]`` (vectorised simulation).
    """
    N = np.asarray(bin_counts, dtype=np.float64)
    A = np.asarray(concentrations, dtype=np.float64)
    n = N.sum(axis=-1, keepdims=True)
    ap = A[:, None] * bin_probs[None, :]  # [a, bins]
    t = (special.gammaln(ap[None] + N[..., None, :]) - special.gammaln(ap)[None]).sum(-1)
    out = special.gammaln(A)[None] - special.gammaln(A[None] + n) + t - (N * np.log(bin_probs)).sum(-1, keepdims=True)
    return out if N.ndim > 1 else out[0]


@dataclass(frozen=True)
class SequentialTestResult:
    """Snapshot of a :class:`SequentialIdentityTest`.

    ``statistic`` is the natural log of the current e-value; ``evalue`` the current
    mixture e-value; ``max_evalue`` its running maximum; ``pvalue`` the anytime-valid
    p-value ``min(1, 1 / max_evalue)``.
    """

    statistic: float
    evalue: float
    max_evalue: float
    pvalue: float
    alpha: float
    n: int
    bins: int
    method: str
    rejected: bool
    support_violations: tuple = ()

    def to_dict(self) -> dict:
        return to_builtin({f: getattr(self, f) for f in self.__dataclass_fields__})


class SequentialIdentityTest:
    """Anytime-valid test of ``H0: samples ~ probs``, checkable after every batch.

    E-process: uniform average over ``concentrations`` (default
    :func:`concentrations_for` the number of bins) of the Dirichlet(A p)-multinomial
    Bayes factors of Lindon & Malek 2022.  Each is a test martingale under H0, so is
    their average; by Ville's inequality ``P(sup_n E_n >= 1/alpha) <= alpha``:
    rejecting the first time ``E >= 1/alpha`` has type-I error <= alpha at any
    stopping time.  For large ``A`` the log Bayes factor is ``(n Z + n) / (2A)`` to
    second order, ``Z`` the unbiased chi-square of Acharya, Daskalakis & Kamath 2015:
    the e-process runs the bias-corrected chi-square sequentially.

    ``min_tv`` (a target resolution) extends the default grid of concentrations so that the
    mixture keeps its power down to that TV (:func:`concentrations_for`).

    Bins: with ``n_max`` (the planned sample size) the bins of
    :func:`identity_test` at ``n_max`` (singletons from one expected count); else
    every outcome of probability ``>= min_mass`` (default 1e-6) is its own bin and
    lighter ones are grouped.  No cap on the number of bins unless ``max_bins`` is
    given (the old behaviour: bins of mass ``>= 1/max_bins``, at most ``max_bins``):
    pooling cancels deviations of opposite sign inside a bin.  Updates cost time
    proportional to the outcomes whose counts changed.  Any count on a
    zero-probability outcome rejects immediately.
    """

    def __init__(self, probs, *, alpha, concentrations=None, max_bins=None, n_max=None, min_mass=MIN_MASS,
                 min_tv=None):
        self._probs = _probs_iv(probs)
        self._alpha = _alpha_iv(alpha)
        if max_bins is not None:
            max_bins = _positive_int_iv(max_bins, "max_bins", minimum=1)
            self._pool = pool(self._probs, 1.0, min_expected=1.0 / max_bins, max_bins=max_bins)
        elif n_max is not None:
            n_max = _positive_int_iv(n_max, "n_max", minimum=1)
            self._pool = pool(self._probs, n_max, min_expected=DEFAULT_MIN_EXPECTED)
        else:
            min_mass = float(min_mass)
            if not (0 < min_mass < 1):
                raise ValueError(f"`min_mass` must lie in (0, 1); got {min_mass!r}.")
            self._pool = pool(self._probs, 1.0, min_expected=min_mass)
        conc = concentrations_for(self._pool.nbins, min_tv) if concentrations is None else concentrations
        conc = np.atleast_1d(np.asarray(conc, dtype=np.float64))
        if conc.ndim != 1 or len(conc) == 0 or not np.all(np.isfinite(conc)) or np.any(conc <= 0):
            raise ValueError("`concentrations` must be a nonempty 1-d sequence of positive finite numbers.")
        self._conc = conc
        self._bp = self._pool.bin_probs
        self._ap = conc[:, None] * self._bp[None, :]   # [A, bins]
        self._logp = np.log(self._bp)
        self._bin_counts = np.zeros(self._pool.nbins, dtype=np.int64)
        self._cells = np.zeros(len(conc))               # sum over bins of lnG(A p + N) - lnG(A p) - N ln p
        self._n = 0
        self._log_e = 0.0
        self._max_log_e = 0.0
        self._violations = []

    def update(self, counts):
        """Add a batch of counts (shape ``[k]``); returns ``self``."""
        counts = _counts_iv(counts, len(self._probs))
        viol = np.flatnonzero((counts > 0) & (self._probs == 0))
        if len(viol):
            self._violations.extend(int(i) for i in viol)
        self._n += int(counts.sum())
        add = self._pool.bin_counts(counts)
        changed = np.flatnonzero(add)
        if self._violations:
            self._log_e = self._max_log_e = float("inf")
            self._bin_counts += add
            return self
        old = self._bin_counts[changed]
        new = old + add[changed]
        ap = self._ap[:, changed]
        # incremental: only the bins whose counts changed (Lindon & Malek 2022 closed form)
        self._cells += (special.gammaln(ap + new) - special.gammaln(ap + old)).sum(axis=1) \
            - float((add[changed] * self._logp[changed]).sum())
        self._bin_counts[changed] = new
        le = special.gammaln(self._conc) - special.gammaln(self._conc + self._n) + self._cells
        self._log_e = float(logsumexp(le) - np.log(len(self._conc)))
        self._max_log_e = max(self._max_log_e, self._log_e)
        return self

    @property
    def e_value(self) -> float:
        return float(np.exp(min(self._log_e, 700.0))) if np.isfinite(self._log_e) else float("inf")

    @property
    def n(self) -> int:
        return self._n

    @property
    def bins(self) -> int:
        return self._pool.nbins

    @property
    def rejected(self) -> bool:
        return bool(self._max_log_e >= -np.log(self._alpha))

    def result(self) -> SequentialTestResult:
        max_e = float(np.exp(min(self._max_log_e, 700.0))) if np.isfinite(self._max_log_e) else float("inf")
        method = ("Dirichlet-multinomial mixture e-process (Lindon & Malek 2022; second order: the unbiased "
                  f"chi-square), {len(self._conc)} concentrations up to {self._conc.max():.3g}, "
                  f"{self._pool.nbins} bins; statistic = log e-value")
        if self._violations:
            method = f"support violation: outcome(s) {self._violations[:10]} have probability 0; " + method
        return SequentialTestResult(statistic=float(self._log_e), evalue=self.e_value, max_evalue=max_e,
                                    pvalue=float(min(1.0, 1.0 / max_e)) if max_e > 0 else 1.0,
                                    alpha=self._alpha, n=self._n, bins=self._pool.nbins, method=method,
                                    rejected=self.rejected, support_violations=tuple(self._violations[:1000]))
