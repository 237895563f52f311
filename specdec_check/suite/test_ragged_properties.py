"""Properties of a ragged verifier (the production calling convention: logits in, per-request parameters).

The verifier comes from the ``specdec_ragged_verifier`` fixture (``--specdec-ragged-verifier``,
``SPECDEC_RAGGED_VERIFIER``, ini ``specdec_ragged_verifier``; default the numpy reference). Each
parameter is one property of :data:`specdec_check.suite._ragged_properties.RAGGED_PROPERTIES`.
"""

import pytest

from specdec_check.suite._properties import suite_params
from specdec_check.suite._ragged_properties import RAGGED_PROPERTIES


@pytest.mark.parametrize("prop", suite_params(RAGGED_PROPERTIES))
def test_ragged_verifier(prop, specdec_ragged_verifier, specdec_checker_options, specdec_ledger):
    prop.check(specdec_ragged_verifier, ledger=specdec_ledger, options=specdec_checker_options)
