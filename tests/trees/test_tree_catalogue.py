"""The tree catalogue: every bug is caught with its finding, every control passes, the rule entries' losses are exact.

Runs on a few scenarios of each scheme's battery in quick mode (fixed seed, alpha 1e-6 per run);
``specdec-check mutants --trees`` runs the whole battery in default mode (notes in the closing report).
"""

import numpy as np
import pytest

from specdec_check import bugs, exact
from specdec_check.checker import check_tree_verifier
from specdec_check.scenarios import default_tree_battery

pytest.importorskip("torch")  # the SGLang entries run the torch port of the kernel

SUBSET = ("star-3-enumerable", "small-tree-enumerable", "random-trees", "eagle-26", "duplicated-siblings")


def _scenarios(drafting):
    return [s for s in default_tree_battery(drafting) if s.name in SUBSET]


@pytest.mark.parametrize("entry", bugs.TREE_BUGS, ids=lambda e: e.name)
def test_every_tree_bug_is_caught_with_its_finding(entry):
    report = check_tree_verifier(entry.sampler, drafting=entry.drafting, scenarios=_scenarios(entry.drafting),
                                 mode="quick", seed=0)
    if entry.expected == "warning":  # an edge case of tiny probability: a warning with its rate (issue 25)
        assert report.passed and report.verdict == "passed", report.summary()
        found = report.warnings
    else:
        assert not report.passed, report.summary()
        found = report.failures
    checks = {f.check for f in found}
    assert checks & set(entry.finding), (entry.name, checks, report.summary())


@pytest.mark.parametrize("entry", bugs.TREE_CONTROLS, ids=lambda e: e.name)
def test_every_tree_control_passes(entry):
    report = check_tree_verifier(entry.sampler, drafting=entry.drafting, scenarios=_scenarios(entry.drafting),
                                 mode="quick", seed=0, rule=entry.check_rule)
    assert report.passed, report.summary()
    assert report.verdict == {"pass": "passed", "inefficiency": "inefficient"}[entry.expected], report.summary()
    if entry.expected == "inefficiency":
        assert {f.check for f in report.inefficiencies} <= set(entry.finding)


def test_the_rule_entries_are_lossy_and_the_references_are_not():
    lossy = [e for e in bugs.TREE_BUGS if e.rule is not None]
    assert {e.name for e in lossy} >= {"tree_iid_rule_on_without_replacement", "tree_iid_rule_on_topk_drafts",
                                       "tree_sglang_threshold_single", "tree_sglang_threshold_acc"}
    for e in lossy:
        assert bugs.tree_entry_tv(e) > 0.01, e.name
    for drafting in exact.DRAFTING_SCHEMES:
        control = bugs.TreeCatalogueEntry("reference", None, drafting, "", "", expected="pass", rule=drafting)
        assert bugs.tree_entry_tv(control) < 1e-12


def test_the_sibling_bug_has_the_iid_rules_law():
    """tree_sibling_law_not_renormalised implements, in other code, exactly the i.i.d. rule's law."""
    scenario = _scenarios("without_replacement")[0]
    rng = np.random.default_rng(2)
    draw = scenario.draw(rng, "without_replacement", calls=200)
    law = exact.tree_emitted_law(draw.parents, draw.draft_token_ids, draw.draft_probs, draw.target_probs, rule="iid")
    codes = exact.encode_emitted(bugs.tree_sibling_law_not_renormalised(
        parents=draw.parents, draft_token_ids=draw.draft_token_ids, draft_probs=draw.draft_probs,
        target_probs=draw.target_probs, generator=np.random.default_rng(3)), scenario.vocab_size)
    from specdec_check import stats

    u = stats.randomized_pit(codes, law, rng=np.random.default_rng(4))
    counts = np.bincount(np.minimum((u * 16).astype(int), 15), minlength=16)
    assert not stats.identity_test(counts, np.full(16, 1 / 16), alpha=1e-9).rejected


def test_the_chain_score_is_untouched():
    """The tree entries live in their own tuple: the chain catalogue keeps its 22 verifier and 6 decode-loop bugs."""
    assert len(bugs.VERIFIER_BUGS) + len(bugs.GENERATOR_BUGS) == 31
    assert not {e.name for e in bugs.catalogue()} & {e.name for e in bugs.tree_catalogue()}
