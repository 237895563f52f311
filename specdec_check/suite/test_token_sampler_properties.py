"""Properties of a token sampler (temperature / top-k / top-p / min-p kernel).

The sampler comes from the ``specdec_token_sampler`` fixture (``--specdec-token-sampler``,
``SPECDEC_TOKEN_SAMPLER``, ini ``specdec_token_sampler``; default the numpy reference), declared by its
``processing`` attribute. Each parameter is one property of
:data:`specdec_check.suite._token_properties.TOKEN_PROPERTIES`.
"""

import pytest

from specdec_check.suite._properties import suite_params
from specdec_check.suite._token_properties import TOKEN_PROPERTIES


@pytest.mark.parametrize("prop", suite_params(TOKEN_PROPERTIES))
def test_token_sampler(prop, specdec_token_sampler, specdec_checker_options, specdec_ledger):
    from specdec_check.exact import TokenProcessing

    processing = getattr(specdec_token_sampler, "processing", None)
    options = {**specdec_checker_options, "processing": processing if isinstance(processing, TokenProcessing)
               else TokenProcessing()}
    prop.check(specdec_token_sampler, ledger=specdec_ledger, options=options)
