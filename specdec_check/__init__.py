"""specdec-check: statistical exactness checks for speculative-decoding samplers.

Plug in a verifier (one step's accept/reject kernel) or a whole decode loop, and
check that it reproduces the target model's law exactly (Leviathan et al. 2023;
Chen et al. 2023). Notation: ``target_*`` is p, ``draft_*`` is q.
"""

from . import exact, samplers, scenarios
from .models import CausalModel, ConstantModel, HashedMarkovModel, MarkovModel, MixtureModel, mix

__version__ = "0.1.0"

__all__ = [
    "CausalModel",
    "ConstantModel",
    "HashedMarkovModel",
    "MarkovModel",
    "MixtureModel",
    "exact",
    "mix",
    "samplers",
    "scenarios",
]
