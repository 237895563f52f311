"""check_tree_verifier(rule="any"): exactness alone, for lossless tree rules other than the scheme's reference.

Each step's emitted tokens are completed to depth + 1 tokens from the exact target and tested against
the target's law (the rule-agnostic test of issue 16); a token of target probability zero fails,
an emission only the reference rule rules out is information. Fixed seeds, alpha = 1e-6 per run.
"""

import numpy as np
import pytest

from specdec_check import bugs, samplers
from specdec_check.checker import check_tree_verifier
from specdec_check.checker.tree.kind import STANDARD_ONLY_CHECKS, TREE_DEFAULT_CHECKS
from specdec_check.scenarios import TreeScenario, default_tree_battery, star_tree

REFERENCES = {"iid": samplers.numpy_verify_tree_iid,
              "without_replacement": samplers.numpy_verify_tree_without_replacement,
              "topk": samplers.numpy_verify_tree_topk}
SUBSET = ("chain-4", "star-3-enumerable", "small-tree-enumerable", "eagle-26", "large-vocabulary")


def _scenarios(drafting, names=SUBSET):
    return [s for s in default_tree_battery(drafting) if s.name in names]


def test_any_selects_the_rule_agnostic_checks():
    assert "completed" in TREE_DEFAULT_CHECKS["any"] and "completed" not in TREE_DEFAULT_CHECKS["standard"]
    assert not set(STANDARD_ONLY_CHECKS) & set(TREE_DEFAULT_CHECKS["any"])
    assert {"first_token", "impossible", "efficiency", "zero_coins"} <= set(TREE_DEFAULT_CHECKS["any"])


@pytest.mark.parametrize("drafting", list(REFERENCES))
def test_each_reference_passes_under_any(drafting):
    report = check_tree_verifier(REFERENCES[drafting], drafting=drafting, scenarios=_scenarios(drafting),
                                 mode="quick", seed=1, rule="any")
    assert report.verdict == "passed", report.summary()
    assert report.rule == "any"
    tests = {r.details.get("test", r.check) for r in report.results}
    assert {"completed", "first_token", "efficiency"} <= {r.check for r in report.results}
    assert not tests & {"accepted_length", "final_token", "sequence_law[1]"}
    large = next(s for s in report.scenarios if s.name == "large-vocabulary")
    assert large.achieved_tv <= 0.15  # the completed test works at V = 32,000 (keyed target conditionals)


@pytest.mark.parametrize("drafting", ["iid", "without_replacement"])
def test_the_one_hot_rule_is_lossless_on_any_scheme(drafting):
    """The one-hot rule on drafts it was not made for: not the reference (standard fails), lossless (any passes,
    inefficient: it accepts fewer nodes than the scheme's rule), its departures named as information."""
    scenarios = _scenarios(drafting, ("star-3-enumerable", "small-tree-enumerable", "chain-4"))
    verify = samplers.numpy_verify_tree_topk
    standard = check_tree_verifier(verify, drafting=drafting, scenarios=scenarios, mode="quick", seed=2)
    assert standard.verdict == "failed", standard.summary()
    anything = check_tree_verifier(verify, drafting=drafting, scenarios=scenarios, mode="quick", seed=2, rule="any")
    assert anything.passed and anything.verdict == "inefficient", anything.summary()
    assert {f.check for f in anything.inefficiencies} == {"efficiency"}
    kinds = {(f.kind, f.check) for f in anything.findings}
    assert ("nonstandard", "impossible") in kinds
    assert not anything.failures


@pytest.mark.parametrize("entry", [e for e in bugs.TREE_BUGS if e.name not in ("sglang_zero_coin_boundary",)],
                         ids=lambda e: e.name)
def test_lossy_tree_bugs_fail_under_any(entry):
    pytest.importorskip("torch") if "sglang" in entry.name else None
    report = check_tree_verifier(entry.sampler, drafting=entry.drafting, mode="quick", seed=0, rule="any",
                                 scenarios=_scenarios(entry.drafting, ("star-3-enumerable", "small-tree-enumerable",
                                                                        "chain-4", "draft-zeros")))
    assert report.verdict == "failed", report.summary()
    assert {f.check for f in report.failures} <= {"completed", "first_token", "impossible"}


def test_the_zero_coin_boundary_is_an_edge_case_under_any():
    pytest.importorskip("torch")
    entry = bugs.tree_entry("sglang_zero_coin_boundary")
    report = check_tree_verifier(entry.sampler, drafting="topk", mode="quick", seed=0, rule="any",
                                 scenarios=_scenarios("topk", ("star-3-enumerable",)))
    assert report.verdict == "passed" and [f.check for f in report.warnings] == ["zero_coins"], report.summary()
    assert "every coin exactly 0" in report.warnings[0].message
    assert "which the target gives probability zero" in report.warnings[0].message  # impossible under every rule


def test_a_target_zero_token_fails_and_a_reference_zero_event_informs():
    """Accepting a child of target probability zero is impossible under every lossless rule; emitting a final
    token outside the reference rule's residual (but of positive target probability) is not."""
    def accept_first_child(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        ids = np.asarray(draft_token_ids)
        out = np.full((ids.shape[0], 2), -1)
        out[:, 0] = ids[:, 0]
        out[:, 1] = 0
        return out

    rows = np.full((1, 3, 3), 1 / 3)
    rows[0, 0] = [0.0, 0.5, 0.5]  # the root's target gives token 0 probability zero
    draft = np.full((1, 3, 3), 1 / 3)
    draft[0, 0] = [0.6, 0.3, 0.1]  # top-k drafts token 0 first
    zero = TreeScenario.from_rows("zero", parents=star_tree(2), target_probs=rows, draft_probs=draft)
    report = check_tree_verifier(accept_first_child, drafting="topk", scenarios=[zero], mode="quick", rule="any",
                                 checks=["contract", "impossible"])
    assert [f.check for f in report.failures] == ["impossible"]

    def final_from_rejected(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        ids = np.asarray(draft_token_ids)
        out = np.full((ids.shape[0], 2), -1)
        out[:, 0] = ids[:, 0]  # stops at the root, emitting a rejected child's token as the final token
        return out

    uniform = TreeScenario.from_rows("u", parents=star_tree(2), target_probs=np.full((1, 3, 3), 1 / 3),
                                     draft_probs=draft)
    report = check_tree_verifier(final_from_rejected, drafting="topk", scenarios=[uniform], mode="quick", rule="any",
                                 checks=["contract", "impossible"])
    assert not report.failures, report.summary()
    assert [(f.kind, f.check) for f in report.findings] == [("nonstandard", "impossible")]
    report = check_tree_verifier(final_from_rejected, drafting="topk", scenarios=[uniform], mode="quick",
                                 checks=["contract", "impossible"])
    assert [f.check for f in report.failures] == ["impossible"]  # under the reference rule: impossible


def test_a_standard_failure_says_what_the_rule_agnostic_test_shows():
    """The first failing scenario of a standard-rule run is rerun under rule='any': a lossless rule other
    than the reference is told to use rule='any'; a lossy one gets the completed law's rejection."""
    scenarios = _scenarios("iid", ("star-3-enumerable", "chain-4"))
    lossless = check_tree_verifier(samplers.numpy_verify_tree_topk, drafting="iid", scenarios=scenarios,
                                   mode="quick", seed=4)
    assert lossless.failures[0].evidence["rule_agnostic"]["verdict"] == "no loss detected"
    assert "rule='any'" in lossless.failures[0].message
    lossy = check_tree_verifier(bugs.tree_residual_not_updated, drafting="iid", scenarios=scenarios, mode="quick",
                                seed=4)
    assert lossy.failures[0].evidence["rule_agnostic"]["verdict"] == "lossy", lossy.summary()
    only = check_tree_verifier(bugs.tree_residual_not_updated, drafting="iid", scenarios=scenarios, mode="quick",
                               seed=4, checks=["contract", "impossible"])
    assert "rule_agnostic" not in only.failures[0].evidence  # a partial run is not diagnosed
