"""parametrize_with_checks(tree_verifiers=[...]): a user's tree verifiers under the suite's tree properties."""

import pytest

pytest_plugins = ["pytester"]

# The suite's quick profile, derandomized (the examples, and so the outcomes, are fixed) and without
# shrinking (the failing bug's example would be shrunk through dozens of checker runs).
FIXED_CONFTEST = '''
from hypothesis import Phase, settings
settings.register_profile("fixed-quick", settings.get_profile("specdec-quick"), derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
'''
QUICK = ("--hypothesis-profile=fixed-quick", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning")

USER_MODULE = '''
from specdec_check.bugs import tree_final_from_root_row
from specdec_check.samplers import numpy_verify_tree_topk
from specdec_check.suite import parametrize_with_checks


@parametrize_with_checks(tree_verifiers=[numpy_verify_tree_topk, tree_final_from_root_row],
                         checks=["tree_contract", "tree_sequence_law"])
def test_my_tree_verifier(check, specdec_ledger, specdec_checker_options):
    check(ledger=specdec_ledger, options=specdec_checker_options)
'''


def test_users_tree_verifiers_get_the_tree_properties(pytester, monkeypatch):
    for var in ("SPECDEC_TREE_VERIFIER", "SPECDEC_BACKEND", "SPECDEC_ALPHA", "CI"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(FIXED_CONFTEST)
    pytester.makepyfile(test_mine=USER_MODULE)
    result = pytester.runpytest_subprocess("test_mine.py", "-v", *QUICK)
    result.stdout.fnmatch_lines(["*test_my_tree_verifier?numpy_verify_tree_topk-tree_contract? PASSED*",
                                 "*test_my_tree_verifier?numpy_verify_tree_topk-tree_sequence_law? PASSED*",
                                 "*test_my_tree_verifier?tree_final_from_root_row-tree_contract? FAILED*"])
    # the bug's emissions are impossible under the top-k rule: the structural property names it
    assert "tree_final_from_root_row fails the tree 'contract' property" in result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 2 and outcomes.get("failed", 0) >= 1


def test_tree_property_names_are_checked():
    from specdec_check.samplers import numpy_verify_tree_topk
    from specdec_check.suite import TREE_VERIFIER_PROPERTIES, parametrize_with_checks

    mark = parametrize_with_checks(tree_verifiers=[numpy_verify_tree_topk])
    ids = [p.id for p in mark.args[1]]
    assert ids == [f"numpy_verify_tree_topk-{name}" for name in TREE_VERIFIER_PROPERTIES]
    with pytest.raises(ValueError, match="unknown check"):
        parametrize_with_checks(tree_verifiers=[numpy_verify_tree_topk], checks=["tree_nope"])
    with pytest.raises(ValueError, match="at least one verifier, generator, tree or ragged verifier"):
        parametrize_with_checks(tree_verifiers=[numpy_verify_tree_topk], checks=["first_token"])
