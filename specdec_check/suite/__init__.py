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
law of the generated tokens and target calls per token.

Every example draws its inputs and the sampler's seed with Hypothesis, so a
failure replays and shrinks; statistical examples take their alpha from the
run's ledger (``--specdec-alpha``, default 1e-6 for the whole run), printed
after collection. See :mod:`specdec_check.pytest_plugin` for the options.
"""

from ._properties import GENERATOR_PROPERTIES, VERIFIER_PROPERTIES, Check, GeneratorCase, Property, generator_cases

__all__ = ["GENERATOR_PROPERTIES", "VERIFIER_PROPERTIES", "Check", "GeneratorCase", "Property", "generator_cases"]
