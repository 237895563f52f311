"""Reference samplers: exact implementations of the two plug-in contracts.

``numpy_verify`` / ``numpy_generate`` always; ``torch_verify`` / ``torch_generate``
when torch is installed (imported lazily, so ``import specdec_check`` never loads torch).
"""

from .._tables import categorical
from ._numpy_generate import check_generate_args, numpy_generate
from ._numpy_verify import numpy_verify

__all__ = ["categorical", "check_generate_args", "numpy_generate", "numpy_verify", "torch_generate", "torch_verify"]


def __getattr__(name):
    if name in ("torch_verify", "torch_generate"):
        from . import _torch

        return getattr(_torch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
