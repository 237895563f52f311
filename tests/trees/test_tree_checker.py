"""check_tree_verifier: references pass, contract and impossible events fail, probes and randomness checks work.

Statistical runs use fixed seeds and the default false-alarm budget (alpha = 1e-6 per run, split
over every test by the checker's ledger), so each pass below has a computed false-alarm rate.
"""

import json

import numpy as np
import pytest

from specdec_check import exact, samplers
from specdec_check.checker import TREE_CHECKS, check_tree_verifier
from specdec_check.checker.tree.block import TreeBlock, check_tree_output, token_classes
from specdec_check.exact._tree_kernels import slot_parents, tree_laws
from specdec_check.scenarios import TreeScenario, default_tree_battery, markov_pair, star_tree

REFERENCES = {"iid": samplers.numpy_verify_tree_iid,
              "without_replacement": samplers.numpy_verify_tree_without_replacement,
              "topk": samplers.numpy_verify_tree_topk}


def _scenarios(drafting, *names):
    return [s for s in default_tree_battery(drafting) if s.name in names]


@pytest.mark.parametrize("drafting", list(REFERENCES))
def test_each_reference_passes_its_battery_in_quick_mode(drafting):
    report = check_tree_verifier(REFERENCES[drafting], drafting=drafting, mode="quick", seed=3)
    assert report.passed, report.summary()
    assert report.kind == "tree_verifier"
    names = {r.details.get("test", r.check) for r in report.results}
    assert {"first_token", "accepted_length", "final_token", "sequence_law[1]", "sequence_law_integrated",
            "efficiency", "independence", "determinism", "zero_coins", "non_finite"} <= names
    assert all(f"--drafting {drafting}" in r for r in [f.repro for f in report.findings] or [f"--drafting {drafting}"])


def test_the_drafting_attribute_is_read_and_reports_replay():
    scenarios = _scenarios("topk", "star-3-enumerable", "random-trees")
    first = check_tree_verifier(samplers.numpy_verify_tree_topk, scenarios=scenarios, mode="quick", seed=11)
    second = check_tree_verifier(samplers.numpy_verify_tree_topk, drafting="topk", scenarios=scenarios, mode="quick",
                                 seed=11)
    strip = lambda r: [(x.check, x.n, x.statistic, x.pvalue) for x in r.results]  # noqa: E731
    assert strip(first) == strip(second)


def test_arguments_are_validated():
    verify = samplers.numpy_verify_tree_topk
    with pytest.raises(ValueError, match="unknown check.*under rule='any'"):
        check_tree_verifier(verify, drafting="topk", rule="any", checks=["accepted_length"])
    with pytest.raises(ValueError, match="rule must be one of"):
        check_tree_verifier(verify, drafting="topk", rule="lossless")
    with pytest.raises(ValueError, match="drafting must be one of"):
        check_tree_verifier(verify, drafting="beam")
    with pytest.raises(ValueError, match="say how the trees are drafted"):
        check_tree_verifier(lambda *, parents, draft_token_ids, draft_probs, target_probs, generator: None)
    with pytest.raises(ValueError, match="unknown check"):
        check_tree_verifier(verify, drafting="topk", checks=["step_law"])
    with pytest.raises(TypeError, match="contract keyword"):
        check_tree_verifier(samplers.numpy_verify, drafting="topk")
    with pytest.raises(TypeError, match="TreeScenario"):
        check_tree_verifier(verify, drafting="topk", scenarios=[object()])
    assert set(TREE_CHECKS) >= {"contract", "impossible", "zero_coins", "sequence_law"}


# --- contract ---------------------------------------------------------------------------------------

def _run(verify, drafting="topk", names=("star-3-enumerable",), **kw):
    return check_tree_verifier(verify, drafting=drafting, scenarios=_scenarios(drafting, *names), mode="quick", **kw)


def _wrap(change):
    def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        out = samplers.numpy_verify_tree_topk(parents=parents, draft_token_ids=draft_token_ids, draft_probs=draft_probs,
                                              target_probs=target_probs, generator=generator)
        return change(out.copy(), np.asarray(draft_token_ids), np.asarray(parents))
    return verify


@pytest.mark.parametrize("change,message", [
    (lambda out, ids, parents: out[:, :-1], "output shape"),
    (lambda out, ids, parents: out.astype(np.float64), "integer"),
    (lambda out, ids, parents: np.where(out >= 0, out + 100, out), "not in"),
    (lambda out, ids, parents: np.concatenate([np.full((out.shape[0], 1), -1), out[:, :-1]], axis=1), "padding"),
])
def test_contract_violations_are_named(change, message):
    report = _run(_wrap(change), names=("small-tree-enumerable",))
    assert not report.passed
    assert report.failures[0].check == "contract" and message in report.failures[0].message, report.summary()


def test_a_path_outside_the_tree_is_a_contract_failure():
    def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        ids = np.asarray(draft_token_ids)
        out = np.full((ids.shape[0], 3), -1)
        taken = (np.arange(5) == ids[:, :1]) | (np.arange(5) == ids[:, 1:2])
        out[:, 0] = (~taken).argmax(axis=1)  # a token no child of the root has, "accepted"
        out[:, 1] = 0
        return out

    parents = np.array([-1, -1, 0, 1])
    target, draft = markov_pair("low-acceptance", vocab_size=5, order=1, seed=2)
    report = check_tree_verifier(verify, drafting="topk", mode="quick", checks=["contract"],
                                 scenarios=[TreeScenario("s", target, draft, parents, 8)])
    assert report.failures[0].check == "contract"
    assert "root path" in report.failures[0].message


def test_writing_into_inputs_is_named():
    def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        target_probs[0, 0, 0] = 0.5
        return np.zeros((1, 1))

    report = _run(verify)
    assert report.failures[0].check == "contract" and "target_probs" in report.failures[0].message


def test_a_raising_verifier_is_a_failure():
    def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        raise RuntimeError("boom")

    report = _run(verify)
    assert not report.passed and "boom" in report.failures[0].message


# --- impossible events and probes -------------------------------------------------------------------

def test_accepting_a_zero_probability_child_is_impossible():
    def verify(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        out = samplers.numpy_verify_tree_topk(parents=parents, draft_token_ids=draft_token_ids,
                                              draft_probs=draft_probs, target_probs=target_probs, generator=generator)
        ids = np.asarray(draft_token_ids)
        out[:, 0] = ids[:, 0]  # always accept node 0
        out[:, 1] = 0
        out[:, 2:] = -1
        return out

    report = _run(verify, names=("disjoint-supports",), checks=["contract", "impossible"])
    assert report.failures[0].check == "impossible", report.summary()
    assert "target gives probability zero" in report.failures[0].message


def test_the_zero_coin_probe_catches_an_inclusive_comparison():
    def inclusive(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        # the one-hot rule with ``u <= r(x)``: exact for every coin but 0
        parents, ids = np.asarray(parents), np.asarray(draft_token_ids)
        target = np.asarray(target_probs)
        coins = generator.random(ids.shape)
        batch, nodes = ids.shape
        out = np.full((batch, exact.tree_depth(parents) + 1), -1)
        for b in range(batch):
            cur, r, k = 0, target[b, 0].copy(), 0
            for i in range(nodes):
                if parents[b, i] + 1 != cur:
                    continue
                x = ids[b, i]
                if coins[b, i] <= r[x] / r.sum():
                    out[b, k], k, cur, r = x, k + 1, i + 1, target[b, i + 1].copy()
                else:
                    r[x] = 0.0
            out[b, k] = int(np.argmax(r))
        return out

    report = _run(inclusive, checks=["contract", "impossible", "zero_coins"])
    # An edge case of probability 2^-53 per float64 coin: a warning with its rate, not a failed run (issue 25).
    assert not report.failures and [f.check for f in report.warnings] == ["zero_coins"], report.summary()
    assert "every coin exactly 0" in report.warnings[0].message and "2^-53" in report.warnings[0].evidence["rate"]
    strict = _run(inclusive, checks=["contract", "impossible", "zero_coins"], strict=True)
    assert [f.check for f in strict.failures] == ["zero_coins"]


def test_a_nan_root_row_must_raise_or_be_marked():
    def silent(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        target = np.nan_to_num(np.asarray(target_probs), nan=1.0)
        return samplers.numpy_verify_tree_topk(parents=parents, draft_token_ids=draft_token_ids,
                                               draft_probs=draft_probs, target_probs=target, generator=generator)

    report = _run(silent, checks=["non_finite"])
    # Robustness, not exactness: a warning, and a failure under strict=True (issue 25).
    assert not report.failures and [f.check for f in report.warnings] == ["non_finite"], report.summary()
    assert [f.check for f in _run(silent, checks=["non_finite"], strict=True).failures] == ["non_finite"]


def test_randomness_outside_the_generator_is_caught():
    def global_rng(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        return samplers.numpy_verify_tree_topk(parents=parents, draft_token_ids=draft_token_ids,
                                               draft_probs=draft_probs, target_probs=target_probs,
                                               generator=np.random.default_rng())

    report = _run(global_rng, checks=["determinism"])
    assert [f.check for f in report.failures] == ["determinism"]


def test_rows_sharing_coins_are_caught():
    def shared(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        seed = int(generator.integers(2**62))
        rows = [samplers.numpy_verify_tree_topk(parents=np.asarray(parents)[b:b + 1],
                                                draft_token_ids=np.asarray(draft_token_ids)[b:b + 1],
                                                draft_probs=np.asarray(draft_probs)[b:b + 1],
                                                target_probs=np.asarray(target_probs)[b:b + 1],
                                                generator=np.random.default_rng(seed))
                for b in range(np.asarray(parents).shape[0])]
        width = max(r.shape[1] for r in rows)
        return np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1])), constant_values=-1) for r in rows])

    report = _run(shared, checks=["independence"], names=("star-8",))
    assert report.failures and {f.check for f in report.failures} == {"independence"}
    assert any("within a call" in f.message for f in report.failures)


# --- laws -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("drafting,name", [("iid", "duplicated-siblings"), ("iid", "random-trees"),
                                           ("topk", "eagle-26"), ("without_replacement", "star-8")])
def test_per_row_pits_are_uniform_under_the_reference(drafting, name):
    """Calibration of every PIT of the block (first token, accepted length, final token, each position):
    20,000 rows of the reference, an exact identity test of 20 bins at alpha 1e-9 each."""
    from specdec_check import stats

    scenario = _scenarios(drafting, name)[0]
    rng = np.random.default_rng(5)
    draw = scenario.draw(rng, drafting, calls=-(-20_000 // scenario.rows_per_call))
    block = TreeBlock(draw, drafting)
    verify = REFERENCES[drafting]
    out = verify(parents=draw.parents, draft_token_ids=draw.draft_token_ids, draft_probs=draw.draft_probs,
                 target_probs=draw.target_probs, generator=np.random.default_rng(6))
    problem, parsed = block.parse(out)
    assert problem is None
    values = {"first": block.pit_first(out, rng.random(out.shape[0])),
              "length": block.pit_length(parsed, rng.random(out.shape[0])),
              "final": block.pit_final(parsed, rng.random(out.shape[0]))}
    for t in range(1, out.shape[1]):
        rows, u = block.pit_position(out, parsed, t, rng.random)
        if rows.size >= 400:
            values[f"position {t}"] = u
    for label, u in values.items():
        counts = np.bincount(np.minimum((u * 20).astype(int), 19), minlength=20)
        res = stats.identity_test(counts, np.full(20, 0.05), alpha=1e-9)
        assert not res.rejected, (label, counts, res.pvalue)


def test_per_row_trees_give_the_laws_of_each_tree():
    rng = np.random.default_rng(1)
    shapes = np.array([[-1, 0, 0, 1], [-1, -1, 1, 2], [-1, 0, 1, 2]])
    target, draft = markov_pair("low-acceptance", vocab_size=6, order=1, seed=4)
    scenario = TreeScenario("mix", target, draft, shapes, 64)
    for drafting in ("iid", "without_replacement", "topk"):
        draw = scenario.draw(rng, drafting)
        mixed = tree_laws(draw.parents, draw.draft_token_ids, draw.draft_probs, draw.target_probs, drafting)
        for b in range(0, 64, 7):
            one = tree_laws(draw.parents[b:b + 1], draw.draft_token_ids[b:b + 1], draw.draft_probs[b:b + 1],
                            draw.target_probs[b:b + 1], drafting)
            np.testing.assert_allclose(mixed.step_law()[b], one.step_law()[0], atol=1e-15)


def test_token_classes_merge_duplicated_paths_only():
    parents = np.array([[-1, -1, 0, 1, 1]])
    tokens = np.array([[-1, 4, 4, 2, 2, 3]])
    cls = token_classes(slot_parents(parents), tokens)
    assert cls.tolist() == [[0, 1, 1, 3, 3, 5]]
    problem, parsed = check_tree_output(np.array([[4, 2, 1]]), parents, tokens[:, 1:], 6)
    assert problem is None and parsed.stop.tolist() == [3] and parsed.final.tolist() == [1]


def test_tree_reports_are_valid_json_reports():
    from specdec_check.report import validate_report

    report = _run(samplers.numpy_verify_tree_topk)
    validate_report(json.loads(report.to_json()))


def test_a_scenario_from_rows_drafts_every_call():
    rng = np.random.default_rng(0)
    rows = rng.dirichlet(np.ones(4), size=(2, 4))
    scenario = TreeScenario.from_rows("rows", parents=star_tree(3), target_probs=rows, draft_probs=rows[::-1])
    report = check_tree_verifier(samplers.numpy_verify_tree_iid, drafting="iid", scenarios=[scenario], mode="quick")
    assert report.passed, report.summary()


@pytest.mark.parametrize("row, message", [
    ([6, -1, -1], "token 6 at row 0, position 0 is not in [0, 6)"),    # V itself is out of range
    ([-2, -1, -1], "token -2 at row 0, position 0 is not in [0, 6)"),  # only -1 pads
    ([-1, -1, -1], "is not one or more tokens"),                        # an empty row emits nothing
    ([4, -1, 1], "is not one or more tokens"),                          # a hole before the last token
])
def test_the_tree_layout_edges_are_contract_violations(row, message):
    """The edges of the layout contract, one at a time: ids in [0, V), -1 padding only after at least one token."""
    parents = np.array([[-1, -1, 0, 1, 1]])
    drafts = np.array([[4, 4, 2, 2, 3]])
    problem, parsed = check_tree_output(np.array([row]), parents, drafts, 6)
    assert parsed is None and message in problem[0], problem
    assert check_tree_output(np.array([[5, -1, -1]]), parents, drafts, 6)[0] is None  # V - 1 is in range


def test_the_report_says_which_drafting_scheme_the_tree_verifier_was_checked_under():
    """A tree run assumed top-k silently when no scheme was given; the header and report.json say it now."""
    from specdec_check.report import render_text

    report = _run(samplers.numpy_verify_tree_topk)
    data = report.to_dict()
    assert data["drafting"] == "topk" and "drafting=topk" in report.summary() and "drafting=topk" in render_text(data)
    from specdec_check import check_verifier
    from specdec_check.scenarios import VerifierScreen

    chain = check_verifier(samplers.numpy_verify, scenarios=[VerifierScreen.default()], seed=0).to_dict()
    assert "drafting" not in chain
