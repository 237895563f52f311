"""What every test result of this package shares: ``rejected`` and a JSON-safe ``to_dict``."""

from __future__ import annotations

from .._json import to_builtin

__all__ = ["TestResultMixin", "to_builtin"]


class TestResultMixin:
    """For frozen result dataclasses with ``pvalue`` and ``alpha`` fields."""

    __test__ = False  # not a pytest test class

    @property
    def rejected(self) -> bool:
        return bool(self.pvalue <= self.alpha)

    def to_dict(self) -> dict:
        """Every field plus ``rejected``, as plain builtins (strict-JSON safe)."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["rejected"] = self.rejected
        return to_builtin(d)
