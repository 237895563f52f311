"""Anytime-valid sequential identity test: Dirichlet-multinomial mixture e-process."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from ._results import to_builtin
from ._pooling import pool
from ._validation import _alpha_iv, _counts_iv, _probs_iv

__all__ = ["SequentialIdentityTest", "SequentialTestResult", "dm_log_evalues"]

DEFAULT_CONCENTRATIONS = tuple(float(a) for a in np.geomspace(10.0, 1e6, 11))


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
    ``geomspace(10, 1e6, 11)``) of the Dirichlet(A p)-multinomial Bayes factors of
    Lindon & Malek 2022 on pooled bins (pooled on ``probs`` only: singletons for
    ``p >= 1/max_bins``, the rest grouped to bins of mass ``>= 1/max_bins``).  Each
    Bayes factor is a test martingale under H0, so is their average; by Ville's
    inequality ``P(sup_n E_n >= 1/alpha) <= alpha``: rejecting the first time
    ``E >= 1/alpha`` has type-I error <= alpha at any stopping time.
    Any count on a zero-probability outcome rejects immediately.
    """

    def __init__(self, probs, *, alpha, concentrations=None, max_bins=256):
        self._probs = _probs_iv(probs)
        self._alpha = _alpha_iv(alpha)
        conc = DEFAULT_CONCENTRATIONS if concentrations is None else concentrations
        conc = np.atleast_1d(np.asarray(conc, dtype=np.float64))
        if conc.ndim != 1 or len(conc) == 0 or not np.all(np.isfinite(conc)) or np.any(conc <= 0):
            raise ValueError("`concentrations` must be a nonempty 1-d sequence of positive finite numbers.")
        self._conc = conc
        self._pool = pool(self._probs, 1.0, min_expected=1.0 / max_bins, max_bins=max_bins)
        self._bin_counts = np.zeros(self._pool.nbins, dtype=np.int64)
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
        self._bin_counts += self._pool.bin_counts(counts)
        if self._violations:
            self._log_e = self._max_log_e = float("inf")
            return self
        le = dm_log_evalues(self._bin_counts, self._pool.bin_probs, self._conc)
        self._log_e = float(special.logsumexp(le) - np.log(len(self._conc)))
        self._max_log_e = max(self._max_log_e, self._log_e)
        return self

    @property
    def e_value(self) -> float:
        return float(np.exp(min(self._log_e, 700.0))) if np.isfinite(self._log_e) else float("inf")

    @property
    def n(self) -> int:
        return self._n

    @property
    def rejected(self) -> bool:
        return bool(self._max_log_e >= -np.log(self._alpha))

    def result(self) -> SequentialTestResult:
        max_e = float(np.exp(min(self._max_log_e, 700.0))) if np.isfinite(self._max_log_e) else float("inf")
        method = ("Dirichlet-multinomial mixture e-process (Lindon & Malek 2022), "
                  f"{len(self._conc)} concentrations, {self._pool.nbins} bins pooled on probs; "
                  "statistic = log e-value")
        if self._violations:
            method = f"support violation: outcome(s) {self._violations[:10]} have probability 0; " + method
        return SequentialTestResult(statistic=float(self._log_e), evalue=self.e_value, max_evalue=max_e,
                                    pvalue=float(min(1.0, 1.0 / max_e)) if max_e > 0 else 1.0,
                                    alpha=self._alpha, n=self._n, bins=self._pool.nbins, method=method,
                                    rejected=self.rejected, support_violations=tuple(self._violations[:1000]))
