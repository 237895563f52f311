"""Reference samplers: exact implementations of the plug-in contracts.

``numpy_verify`` / ``numpy_generate`` and the tree verifiers ``numpy_verify_tree_*`` always;
``torch_verify`` / ``torch_generate`` / ``torch_verify_tree_*`` when torch is installed
(imported lazily, so ``import specdec_check`` never loads torch).
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
from ._token_numpy import numpy_sample
from ._tree_numpy import numpy_verify_tree_iid, numpy_verify_tree_topk, numpy_verify_tree_without_replacement

__all__ = ["RosenblattPIT", "block_verify", "categorical", "check_generate_args", "complete_with_target",
           "numpy_generate", "numpy_ragged_verifier", "numpy_ragged_verify", "numpy_sample", "numpy_verify", "numpy_verify_tree_iid",
           "numpy_verify_tree_topk", "numpy_verify_tree_without_replacement", "rosenblatt_pit", "torch_block_verify",
           "torch_generate", "torch_ragged_verifier", "torch_ragged_verify", "torch_sample", "torch_verify", "torch_verify_tree_iid",
           "torch_verify_tree_topk", "torch_verify_tree_without_replacement"]

_TORCH = {"torch_verify": "_torch", "torch_generate": "_torch", "torch_block_verify": "_torch_block",
          "torch_verify_tree_iid": "_tree_torch", "torch_verify_tree_topk": "_tree_torch",
          "torch_verify_tree_without_replacement": "_tree_torch", "torch_ragged_verify": "_ragged_torch",
          "torch_ragged_verifier": "_ragged_torch", "torch_sample": "_token_torch"}


def __getattr__(name):
    if name in _TORCH:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_TORCH[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
