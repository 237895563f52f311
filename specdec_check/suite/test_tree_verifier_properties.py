"""Properties of a tree verifier ``verify_tree(*, parents, draft_token_ids, draft_probs, target_probs, generator)``.

The verifier comes from the ``specdec_tree_verifier`` fixture (``--specdec-tree-verifier``,
``SPECDEC_TREE_VERIFIER``, ini ``specdec_tree_verifier``; default the numpy top-k reference); its
drafting scheme from its ``drafting`` attribute (top-k when it has none). Each parameter is one
property of :data:`specdec_check.suite.TREE_VERIFIER_PROPERTIES`.
"""

import pytest

from specdec_check.suite._properties import TREE_VERIFIER_PROPERTIES, suite_params


@pytest.mark.parametrize("prop", suite_params(TREE_VERIFIER_PROPERTIES))
def test_tree_verifier(prop, specdec_tree_verifier, specdec_checker_options, specdec_ledger):
    prop.check(specdec_tree_verifier, ledger=specdec_ledger, options=specdec_checker_options)
