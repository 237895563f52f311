"""Target and draft models behind one causal, transformer-like interface."""

from ._base import CausalModel, last_token_probs, vocab_size_of
from ._contexts import context_indices, last_context_indices
from ._hashed import HashedMarkovModel
from ._markov import ConstantModel, MarkovModel
from ._mixture import MixtureModel, mix
from ._oracle import ModelLaw, from_hf_model, from_mlx_model, from_torch_module

__all__ = [
    "CastLawModel",
    "CausalModel",
    "ConstantModel",
    "HashedMarkovModel",
    "MarkovModel",
    "MixtureModel",
    "ModelLaw",
    "TorchModel",
    "context_indices",
    "from_hf_model",
    "from_mlx_model",
    "from_torch_module",
    "last_context_indices",
    "last_token_probs",
    "mix",
    "vocab_size_of",
]


def __getattr__(name):
    # The torch-backed names load torch: only on first use.
    if name == "TorchModel":
        from ._torch import TorchModel

        return TorchModel
    if name == "CastLawModel":
        from ._cast import CastLawModel

        return CastLawModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
