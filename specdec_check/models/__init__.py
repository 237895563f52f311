"""Target and draft models behind one causal, transformer-like interface."""

from ._base import CausalModel, last_token_probs, vocab_size_of
from ._hashed import HashedMarkovModel
from ._markov import ConstantModel, MarkovModel
from ._mixture import MixtureModel, mix

__all__ = [
    "CausalModel",
    "ConstantModel",
    "HashedMarkovModel",
    "MarkovModel",
    "MixtureModel",
    "last_token_probs",
    "mix",
    "vocab_size_of",
]
