"""The one converter from the package's values to JSON-safe builtins (reports, test results)."""

from __future__ import annotations

import math

__all__ = ["to_builtin"]


def to_builtin(value):
    """Plain builtins for strict JSON and pickling: dicts (string keys), lists, str, int, float, bool, None.

    Tuples become lists; numpy scalars and arrays become Python numbers and lists (through
    ``tolist``); non-finite floats become ``None`` (strict JSON has no inf or NaN).
    """
    if isinstance(value, dict):
        return {str(k): to_builtin(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_builtin(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return to_builtin(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
