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
    "CheckReport",
    "ConstantModel",
    "Finding",
    "HashedMarkovModel",
    "MarkovModel",
    "MixtureModel",
    "check_generator",
    "check_verifier",
    "exact",
    "mix",
    "samplers",
    "scenarios",
]


_LAZY = {"CheckReport", "Finding", "check_generator", "check_verifier"}


def __getattr__(name):
    # The checker pulls in scipy.stats; load it on first use so the CLI and the pytest plugin start fast.
    if name in _LAZY:
        from . import checker

        return getattr(checker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
