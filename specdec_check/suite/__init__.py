"""The installed property suite: run it against your own sampler.

::

    pytest --pyargs specdec_check.suite --specdec-verifier mypkg.kernels:verify
    pytest --pyargs specdec_check.suite --specdec-generator mypkg.decode:generate -k generator

Properties of a verifier (``test_verifier_properties.py``): the step law, the
first-token marginal, the conditional at the stop position, the accepted-count
law, efficiency against the optimal acceptance, target == draft accepts every
draft, disjoint supports reject at the first position, determinism for a fixed
generator state, independence across calls and rows, batch invariance, and the
output contract. Of a decode loop (``test_generator_properties.py``): the joint
law of the generated tokens and target calls per token. Of a tree verifier
(``test_tree_verifier_properties.py``, ``--specdec-tree-verifier``, its scheme from
``verify_tree.drafting``, top-k by default): the tree contract, the emitted sequence's
law and the accepted length. Of a token sampler (``test_token_sampler_properties.py``,
``--specdec-token-sampler``, its processing from ``sample.processing``): the contract and support, the exact
processed law, determinism and independence.

Every example draws its inputs and the sampler's seed with Hypothesis, so a
failure replays and shrinks; statistical examples take their alpha from the
run's ledger (``--specdec-alpha``, default 1e-6 for the whole run), printed
after collection. :func:`parametrize_with_checks` runs the same properties in your
own test modules. Names load on first use: importing this package costs nothing.
"""

__all__ = [
    "DEFAULT_EXAMPLE_ALPHA",
    "GENERATOR_PROPERTIES",
    "PROFILES",
    "TOKEN_PROPERTIES",
    "TREE_VERIFIER_PROPERTIES",
    "VERIFIER_PROPERTIES",
    "Check",
    "GeneratorCase",
    "Property",
    "Selection",
    "SuiteLedger",
    "SuiteSession",
    "generator_cases",
    "parametrize_with_checks",
]

_HOMES = {
    "parametrize_with_checks": "_api",
    "DEFAULT_EXAMPLE_ALPHA": "_session",
    "PROFILES": "_session",
    "Selection": "_session",
    "SuiteLedger": "_session",
    "SuiteSession": "_session",
    "GENERATOR_PROPERTIES": "_properties",
    "VERIFIER_PROPERTIES": "_properties",
    "TREE_VERIFIER_PROPERTIES": "_properties",
    "TOKEN_PROPERTIES": "_token_properties",
    "Check": "_properties",
    "GeneratorCase": "_properties",
    "Property": "_properties",
    "generator_cases": "_properties",
}


def __getattr__(name):
    import importlib

    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
