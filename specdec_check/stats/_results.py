"""What every test result of this package shares: ``rejected`` and a JSON-safe ``to_dict``."""

from __future__ import annotations

import numpy as np

__all__ = ["TestResultMixin", "to_builtin"]


def to_builtin(x):
    """Plain Python builtins for JSON / pytest-xdist (non-finite floats become ``None``)."""
    if isinstance(x, dict):
        return {str(k): to_builtin(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_builtin(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if np.isfinite(x) else None  # strict JSON has no inf/nan
    if isinstance(x, (np.bool_,)):
        return bool(x)
    return x


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
