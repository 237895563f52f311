"""Properties of a decode loop ``generate(*, target, draft, prompts, max_new_tokens, gamma, generator)``.

The loop comes from the ``specdec_generator`` fixture (``--specdec-generator``,
``SPECDEC_GENERATOR``, ini ``specdec_generator``; default the numpy reference).
"""

import pytest
from hypothesis import given

from specdec_check.pytest_plugin import suite_settings
from specdec_check.suite._properties import GENERATOR_PROPERTIES as P

statistical = pytest.mark.specdec_statistical


@statistical
@suite_settings()
@given(**P["joint"].strategies())
def test_generator_joint(specdec_generator, specdec_checker_options, specdec_ledger, case, seed):
    """The generated tokens have exactly the target model's joint law."""
    P["joint"].run(specdec_generator, case=case, seed=seed, alpha=specdec_ledger.alpha(),
                   options=specdec_checker_options)


@statistical
@suite_settings()
@given(**P["target_calls"].strategies())
def test_generator_target_calls(specdec_generator, specdec_checker_options, specdec_ledger, case, seed):
    """Target calls per generated token match the exact expectation (one call per step)."""
    P["target_calls"].run(specdec_generator, case=case, seed=seed, alpha=specdec_ledger.alpha(),
                          options=specdec_checker_options)
