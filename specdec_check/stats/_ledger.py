"""Alpha ledger: split a run's false-alarm budget over its planned checks (Bonferroni)."""
from __future__ import annotations

from ._validation import _alpha_iv, _positive_int_iv

__all__ = ["AlphaLedger", "AlphaBudgetExceeded"]


class AlphaBudgetExceeded(RuntimeError):
    """Raised when a run spends more checks than its alpha budget planned for."""


class AlphaLedger:
    """Family-wise false-alarm budget of one run, ``per_check = total / planned`` (Bonferroni).

    By the union bound the probability that *any* of the ``planned`` checks raises a
    false alarm is at most ``total`` (statistics.md section 4).
    """

    def __init__(self, total=1e-6, *, planned):
        self._total = _alpha_iv(total, "total")
        self._planned = _positive_int_iv(planned, "planned")
        self._used = 0
        self._entries = []

    @property
    def total(self) -> float:
        return self._total

    @property
    def planned(self) -> int:
        return self._planned

    @property
    def per_check(self) -> float:
        return self._total / self._planned

    @property
    def checks_spent(self) -> int:
        return self._used

    @property
    def spent(self) -> float:
        return self.per_check * self._used

    @property
    def remaining(self) -> float:
        return self.per_check * (self._planned - self._used)

    @property
    def entries(self):
        return list(self._entries)

    def spend(self, label: str, *, checks: int = 1) -> float:
        """Spend ``checks`` checks' worth of alpha; returns the alpha to use (``per_check * checks``)."""
        checks = _positive_int_iv(checks, "checks")
        if self._used + checks > self._planned:
            raise AlphaBudgetExceeded(
                f"alpha budget exceeded at {label!r}: spending {checks} more check(s) after "
                f"{self._used} would exceed the plan of {self._planned} checks "
                f"(total alpha {self._total:g}, {self.per_check:g} per check). "
                "Increase `planned` (and so lower the per-check alpha) or run fewer checks.")
        self._used += checks
        a = self.per_check * checks
        self._entries.append((str(label), a))
        return a

    def to_dict(self) -> dict:
        return {"total": float(self._total), "planned": int(self._planned), "per_check": float(self.per_check),
                "checks_spent": int(self._used), "spent": float(self.spent), "remaining": float(self.remaining),
                "entries": [[lab, float(a)] for lab, a in self._entries]}

    def __repr__(self):
        return (f"AlphaLedger(total={self._total:g}, planned={self._planned}, "
                f"spent_checks={self._used})")
