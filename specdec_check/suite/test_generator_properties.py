"""Properties of a decode loop ``generate(*, target, draft, prompts, max_new_tokens, gamma, generator)``.

The loop comes from the ``specdec_generator`` fixture (``--specdec-generator``,
``SPECDEC_GENERATOR``, ini ``specdec_generator``; default the numpy reference). Each
parameter is one property of :data:`specdec_check.suite.GENERATOR_PROPERTIES`.
"""

import pytest

from specdec_check.suite._properties import GENERATOR_PROPERTIES, suite_params


@pytest.mark.parametrize("prop", suite_params(GENERATOR_PROPERTIES))
def test_generator(prop, specdec_generator, specdec_checker_options, specdec_ledger):
    prop.check(specdec_generator, ledger=specdec_ledger, options=specdec_checker_options)
