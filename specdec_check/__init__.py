"""specdec-check: statistical exactness checks for speculative-decoding samplers.

Plug in a verifier (one step's accept/reject kernel) or a whole decode loop, and
check that it reproduces the target model's law exactly (Leviathan et al. 2023;
Chen et al. 2023). Notation: ``target_*`` is p, ``draft_*`` is q.

Every name is loaded on first use (PEP 562): ``import specdec_check`` costs nothing, so the
pytest plugin and the command line start without numpy until a check actually runs.
"""

__version__ = "0.1.0"

__all__ = [
    "CausalModel",
    "CheckOptions",
    "CheckReport",
    "ConstantModel",
    "Finding",
    "HashedMarkovModel",
    "MarkovModel",
    "MixtureModel",
    "TokenProcessing",
    "check_draft_consistency",
    "check_generator",
    "check_ragged_verifier",
    "check_token_sampler",
    "check_tree_verifier",
    "check_verifier",
    "exact",
    "mix",
    "mode_for_tv",
    "samplers",
    "scenarios",
    "stats",
]

#: name -> the submodule that defines it.
_LAZY = {
    "CausalModel": "models",
    "ConstantModel": "models",
    "HashedMarkovModel": "models",
    "MarkovModel": "models",
    "MixtureModel": "models",
    "mix": "models",
    "CheckOptions": "checker.core.options",
    "CheckReport": "checker",
    "Finding": "checker",
    "check_draft_consistency": "checker",
    "check_token_sampler": "checker",
    "TokenProcessing": "exact",
    "check_generator": "checker",
    "check_ragged_verifier": "checker",
    "check_verifier": "checker",
    "check_tree_verifier": "checker",
    "mode_for_tv": "checker",
}
_SUBMODULES = {"exact", "samplers", "scenarios", "stats"}


def __getattr__(name):
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
