"""Properties of a verifier ``verify(*, draft_token_ids, draft_probs, target_probs, generator)``.

The verifier comes from the ``specdec_verifier`` fixture (``--specdec-verifier``,
``SPECDEC_VERIFIER``, ini ``specdec_verifier``; default the numpy reference). Each
parameter is one property of :data:`specdec_check.suite.VERIFIER_PROPERTIES`: structural
ones assert on outputs directly and spend no alpha; statistical ones (marked) spend their
example's share of the run's false-alarm budget.
"""

import pytest

from specdec_check.suite._properties import VERIFIER_PROPERTIES, suite_params


@pytest.mark.parametrize("prop", suite_params(VERIFIER_PROPERTIES))
def test_verifier(prop, specdec_verifier, specdec_checker_options, specdec_ledger):
    prop.check(specdec_verifier, ledger=specdec_ledger, options=specdec_checker_options)
