"""One policy table for every kind (issue 25): the same robustness case gets the same class in the chain,
tree and ragged kinds, ``strict=True`` turns it into a failure in all of them, and an edge case (every coin
exactly 0) is a warning that states its rate and never stops the scenario's law tests.

Each fixture below is an exact reference wrapped so that it misbehaves in exactly one case: it emits tokens
for a NaN row (no NaN guard), raises on a degenerate shape, or accepts a draft of target probability zero
when every coin is exactly 0 (as an inclusive ``coin <= p / q`` does: SGLang #35771). Runs use fixed seeds;
the probes spend no alpha, so the findings asserted here are exact, not statistical.
"""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check import samplers
from specdec_check.checker import check_ragged_verifier, check_tree_verifier, check_verifier
from specdec_check.checker.core.policy import CASES, finding_kind
from specdec_check.scenarios import (RaggedRequest, RaggedScenario, TreeScenario, VerifierScenario, chain_tree,
                                     default_ragged_battery, default_tree_battery, default_verifier_battery,
                                     markov_pair)

TREE_REFERENCES = {"iid": samplers.numpy_verify_tree_iid,
                   "without_replacement": samplers.numpy_verify_tree_without_replacement,
                   "topk": samplers.numpy_verify_tree_topk}


def _uniform_where_nan(probs):
    probs = np.array(probs, dtype=float)
    bad = ~np.isfinite(probs).all(axis=-1)
    probs[bad] = 1.0 / probs.shape[-1]
    return probs


# --------------------------------------------------------------------------- the kinds, one way to call each

def _chain(case):
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids = np.asarray(draft_token_ids)
        if case == "degenerate" and ids.shape[1] == 0:
            raise ValueError("gamma = 0 is not supported")
        if case == "zero_coin" and generator.random() == 0.0:  # accepts the first draft whatever p(x)
            out = np.full((ids.shape[0], ids.shape[1] + 1), -1)
            out[:, 0], out[:, 1] = ids[:, 0], 1
            return out
        if case == "nan":
            target_probs = _uniform_where_nan(target_probs)
        return samplers.numpy_verify(draft_token_ids=ids, draft_probs=draft_probs, target_probs=target_probs,
                                     generator=generator)

    scenario = (VerifierScenario("gamma-0", *markov_pair("target-equals-draft", vocab_size=5), gamma=0, rows_per_call=16)
                if case == "degenerate" else default_verifier_battery()[2])
    return lambda **kw: check_verifier(verify, scenarios=[scenario], mode="quick", seed=0, **kw)


def _tree(drafting):
    def make(case):
        reference = TREE_REFERENCES[drafting]

        def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
            ids, parents = np.asarray(draft_token_ids), np.asarray(parents)
            if case == "degenerate" and np.shape(target_probs)[-1] == 1:
                raise ValueError("a vocabulary of one token is not supported")
            if case == "zero_coin" and generator.random() == 0.0:  # accepts the root's first child
                depth = int(np.asarray(target_probs).shape[1])  # nodes + 1 >= depth + 1
                out = np.full((ids.shape[0], depth), -1)
                out[:, 0], out[:, 1] = ids[:, 0], 1
                from specdec_check.exact import tree_depth

                return out[:, :tree_depth(parents) + 1]
            if case == "nan":
                target_probs = _uniform_where_nan(target_probs)
            return reference(parents=parents, draft_token_ids=ids, draft_probs=draft_probs,
                             target_probs=target_probs, generator=generator)

        if case == "degenerate":
            # (a tree without nodes is refused by TreeScenario itself: V = 1 is the tree kind's degenerate shape)
            scenario = TreeScenario("one-token", *markov_pair("target-equals-draft", vocab_size=1),
                                    trees=chain_tree(1).reshape(1, -1), rows_per_call=16)
        else:
            scenario = [s for s in default_tree_battery(drafting) if s.name == "star-3-enumerable"][0]
        return lambda **kw: check_tree_verifier(verify, drafting=drafting, scenarios=[scenario], mode="quick",
                                                seed=0, **kw)
    return make


def _ragged(case):
    def verify(*, generator, **inputs):
        counts = np.asarray(inputs["num_draft_tokens"])
        if case == "degenerate" and counts.max(initial=0) == 0:
            raise ValueError("a batch without drafts is not supported")
        if case == "zero_coin" and generator.random() == 0.0:  # accepts every request's first draft
            ids, start = np.asarray(inputs["draft_token_ids"]), np.r_[0, np.cumsum(counts)[:-1]]
            out = np.full((counts.size, counts.max(initial=0) + 1), -1)
            out[:, 0] = np.where(counts > 0, ids[np.minimum(start, max(ids.size - 1, 0))] if ids.size else 0, 1)
            out[counts > 0, 1] = 1
            return out
        if case == "nan":
            logits = np.array(inputs["target_logits"], dtype=float)
            logits[~np.isfinite(logits).all(axis=-1)] = 0.0
            inputs["target_logits"] = logits
        return samplers.numpy_ragged_verify(generator=generator, **inputs)

    if case == "degenerate":
        scenario = RaggedScenario("no-drafts", 6, (RaggedRequest(0), RaggedRequest(0, temperature=0.0)))
    else:
        scenario = [s for s in default_ragged_battery() if s.name != "ragged-ngram-v64"][0]
    return lambda **kw: check_ragged_verifier(verify, scenarios=[scenario], mode="quick", seed=0, **kw)


KINDS = {"chain": _chain, "tree-iid": _tree("iid"), "tree-without_replacement": _tree("without_replacement"),
         "tree-topk": _tree("topk"), "ragged": _ragged}
#: The case, the check that reports it, and its policy case (:data:`specdec_check.checker.core.policy.CASES`).
ROBUSTNESS_CASES = {"nan": ("non_finite", "robustness"), "degenerate": ("contract", "robustness"),
                    "zero_coin": ("zero_coins", "edge_case")}


def _classes(report, check):
    return sorted({f.kind for f in report.findings if f.check == check})


@pytest.mark.parametrize("case", list(ROBUSTNESS_CASES))
def test_each_robustness_case_gets_one_class_in_every_kind_and_strict_makes_it_a_failure(case):
    check, policy_case = ROBUSTNESS_CASES[case]
    seen = {}
    for name, kind in KINDS.items():
        run = kind(case)
        default, strict = run(), run(strict=True)
        seen[name] = (_classes(default, check), _classes(strict, check))
        assert default.verdict != "failed", (name, default.summary())
        assert strict.verdict == "failed", (name, strict.summary())
    expected = ([finding_kind(policy_case, strict=False)], [finding_kind(policy_case, strict=True)])
    assert expected == (["warning"], ["failure"])
    assert seen == {name: expected for name in KINDS}, seen


@pytest.mark.parametrize("name", list(KINDS))
def test_an_exactly_zero_coin_states_its_rate_and_the_law_tests_still_run(name):
    report = KINDS[name]("zero_coin")()
    [finding] = [f for f in report.findings if f.check == "zero_coins"]
    assert finding.kind == "warning" and "2^-53" in finding.evidence["rate"] and "2^-24" in finding.evidence["rate"]
    assert "edge case" in finding.message and "2^-53" in finding.message
    law = [r for r in report.results if r.method not in ("skipped",) and r.alpha > 0]
    assert law and all(r.passed for r in law), report.summary()  # exact otherwise: every law test ran and passed
    assert report.verdict == "passed", report.summary()


def test_the_policy_table_is_the_only_place_a_class_is_chosen():
    # Findings are built in one place, the recorder, which looks their class up in CASES: no check in any kind
    # writes a finding kind itself.
    from pathlib import Path

    import specdec_check.checker as checker

    built = [str(p.relative_to(Path(checker.__file__).parent)) for p in Path(checker.__file__).parent.rglob("*.py")
             if "Finding(" in p.read_text().replace("class Finding(", "")]
    assert built == ["core/recorder.py"], built
    assert set(CASES) == {"failure", "robustness", "edge_case", "inefficiency", "information"}
    with pytest.raises(ValueError, match="unknown finding case 'nan'"):
        finding_kind("nan", strict=False)


def test_the_zero_coin_probe_ends_on_an_exact_sampler_that_draws_by_rejection():
    # numpy's gumbel redraws while 1 - u == 1 and its normal ziggurat loops on an all-zero stream: the probe's
    # generator is exactly 0 for its first 256 uniforms only, so an exact Gumbel-max verifier returns.
    from specdec_check.checker.backends import make_backend
    from specdec_check.checker.checks.probes import zero_generator

    zero = zero_generator(make_backend("numpy"))
    assert not zero.random(256).any() and zero.gumbel() != 0.0 and np.isfinite(zero.standard_normal())

    def gumbel_max(*, draft_token_ids, draft_probs, target_probs, generator):
        generator.gumbel(size=np.shape(target_probs))  # a draw the all-zero stream never ends
        return samplers.numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs,
                                     target_probs=target_probs, generator=generator)

    report = check_verifier(gumbel_max, scenarios=[default_verifier_battery()[2]], mode="quick", seed=0,
                            checks=["contract", "zero_coins"])
    assert [r.passed for r in report.results if r.check == "zero_coins"] == [True]
