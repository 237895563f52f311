"""Reference samplers: exact implementations of the two plug-in contracts.

``numpy_verify`` / ``numpy_generate`` always; ``torch_verify`` / ``torch_generate``
when torch is installed (imported lazily, so ``import specdec_check`` never loads torch).
``block_verify`` / ``torch_block_verify``: block verification (Sun et al., ICLR 2025),
a lossless verifier that is not the standard rule. ``complete_with_target`` and
``rosenblatt_pit``: the rule-agnostic exactness test's completion and transform.
"""

from .._tables import categorical
from ._block_verify import block_verify
from ._numpy_generate import check_generate_args, numpy_generate
from ._numpy_verify import numpy_verify
from ._ragged_numpy import numpy_ragged_verifier, numpy_ragged_verify
from ._rosenblatt import RosenblattPIT, complete_with_target, rosenblatt_pit

__all__ = ["RosenblattPIT", "block_verify", "categorical", "check_generate_args", "complete_with_target",
           "numpy_generate", "numpy_ragged_verifier",
           "numpy_ragged_verify", "numpy_verify", "rosenblatt_pit", "torch_block_verify", "torch_generate", "torch_ragged_verifier",
           "torch_ragged_verify", "torch_verify"]


def __getattr__(name):
    if name in ("torch_verify", "torch_generate"):
        from . import _torch

        return getattr(_torch, name)
    if name in ("torch_ragged_verify", "torch_ragged_verifier"):
        from . import _ragged_torch

        return getattr(_ragged_torch, name)
    if name == "torch_block_verify":
        from . import _torch_block

        return _torch_block.torch_block_verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
