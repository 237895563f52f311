"""Two-sided independence of rows with identical inputs (the joint-PIT pair test, the screen's coupling
tests) and the order of findings when rows are dependent."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specdec_check import check_verifier
from specdec_check.bugs import entry
from specdec_check.checker.checks.randomness import PAIR_PIT_BINS, pair_pit_verdict
from specdec_check.checker.core.report import Finding
from specdec_check.checker.core.verdict import CONSEQUENCE_OF_DEPENDENCE, by_cause
from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import default_verifier_battery


class _Recorder:
    def __init__(self):
        self.records, self.findings = [], []

    def record(self, record):
        self.records.append(record)

    def failure(self, check, message, evidence=None):
        self.findings.append((check, message))


def _verdict(first, second, alpha=1e-8):
    ctx = SimpleNamespace(scenario=SimpleNamespace(name="s"), recorder=_Recorder())
    rejected = pair_pit_verdict(ctx, "accepted count", "rows within a call", first, second, alpha)
    return rejected, ctx.recorder


def test_the_pair_test_counts_each_pair_in_one_of_the_grid_cells():
    first, second = np.array([0.0, 0.3, 0.99, 1.0]), np.array([0.26, 0.3, 0.5, 0.0])
    _, recorder = _verdict(first, second)
    (record,) = recorder.records
    observed = np.zeros(PAIR_PIT_BINS**2, dtype=int)
    for cell in (0 * 4 + 1, 1 * 4 + 1, 3 * 4 + 2, 3 * 4 + 0):
        observed[cell] += 1
    assert record.details["observed"] == observed.tolist() and record.n == 4


@pytest.mark.parametrize("seed", range(5))
def test_independent_pairs_pass_and_coupled_pairs_fail(seed):
    """Independent uniforms pass (the identity test's level is its own: tests/stats); antithetic (1 - u),
    identical and stratified halves (one in [0, 1/2), the other in [1/2, 1)) pairs of 200 are rejected at
    1e-8."""
    rng = np.random.default_rng(seed)
    u, v = rng.random(200), rng.random(200)
    assert not _verdict(u, v)[0]
    assert _verdict(u, 1.0 - u)[0]
    assert _verdict(u, u)[0]
    rejected, recorder = _verdict(u / 2, (1 + v) / 2)
    assert rejected and "not independent" in recorder.findings[0][1]


def test_an_antithetic_verifier_fails_the_battery_pair_test_without_the_screen():
    """Without the screen, the joint PIT of a scenario's identical-input pairs finds antithetic rows."""
    scenarios = [s for s in default_verifier_battery() if s.name == "corpus-bigram"]
    report = check_verifier(entry("antithetic_row_pairs").sampler, scenarios=scenarios, mode="quick", seed=0)
    joint = [f for f in report.failures if f.check == "independence" and "joint law" in f.message]
    assert joint, report.summary()
    reference = check_verifier(numpy_verify, scenarios=scenarios, mode="quick", seed=0)
    assert reference.passed and any("joint PIT" in r.method for r in reference.results), reference.summary()


def test_with_dependent_rows_the_independence_failures_come_first_and_the_law_failures_say_why():
    law = Finding("failure", "first_token", "a", "the output law differs")
    warning = Finding("warning", "non_finite", "a", "NaN rows")
    dependent = Finding("failure", "independence", "b", "rows are coupled", {"dependence": True})
    collisions = Finding("failure", "independence", "b", "too many identical outputs")
    ordered = by_cause([law, warning, collisions, dependent], ("first_token",))
    assert [f.message for f in ordered][:2] == ["rows are coupled", "the output law differs" + CONSEQUENCE_OF_DEPENDENCE]
    assert [f.message for f in ordered][2:] == ["NaN rows", "too many identical outputs"]
    assert by_cause([law, warning], ("first_token",)) == [law, warning]  # no dependence: unchanged
    # A collision count alone does not separate dependence from a wrong law: nothing moves.
    assert by_cause([law, collisions], ("first_token",)) == [law, collisions]


def test_the_pair_test_is_not_judged_when_the_rows_own_law_is_off():
    """Independent rows with a wrong law (both PITs piled in [0, 1/4)) are not called dependent: the pooled
    PITs fail the marginal guard, so the joint test withholds its finding (the law tests name the law)."""
    rng = np.random.default_rng(4)
    rejected, recorder = _verdict(rng.random(400) / 4, rng.random(400) / 4)
    assert not rejected and not recorder.records and not recorder.findings


def test_a_dependence_failure_gets_no_advice_about_other_lossless_rules():
    """The rule-agnostic diagnosis (is this another lossless rule?) does not apply to coupled rows: every
    lossless rule needs independent rows."""
    scenarios = [s for s in default_verifier_battery() if s.name == "corpus-bigram"]
    report = check_verifier(entry("rows_share_uniforms").sampler, scenarios=scenarios, mode="quick", seed=0)
    first = report.failures[0]
    assert first.check == "independence" and "rule_agnostic" not in first.evidence, first
    assert all("--rule any" not in f.message for f in report.failures if f.check == "independence")


def _odd_tail_from_row_zero(*, draft_token_ids, draft_probs, target_probs, generator):
    """Rows processed in pairs; an odd batch's last row is verified against row 0's target rows (a
    kernel whose tail path indexes the wrong row). Exact on every batch of 1 row or an even number."""
    target = np.array(target_probs, copy=True)
    batch = target.shape[0]
    if batch % 2 and batch > 1:
        target[-1] = target[0]
    return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target,
                        generator=generator)


def test_the_battery_calls_with_odd_batches_above_one():
    """A kernel that mishandles an odd tail is seen: the battery has odd, prime and just-past-a-power-of-two
    batch sizes (3, 7, 33, 257, 4097), and the within-call independence calls keep them."""
    sizes = {s.rows_per_call for s in default_verifier_battery()}
    assert {3, 7, 33, 257, 4097} <= sizes, sizes
    report = check_verifier(_odd_tail_from_row_zero, mode="quick", seed=0)
    assert not report.passed and report.failures, report.summary()
    assert {f.scenario for f in report.failures} <= {s.name for s in default_verifier_battery() if s.rows_per_call % 2
                                                     and s.rows_per_call > 1}, report.summary()


def test_a_single_row_call_names_its_impossible_event_as_the_law_loop_does():
    # Issue 29, defect 10: the batch-invariance check's single-row calls said "support violation: sample 0 is
    # outcome 2" where the law loop says which event of probability zero it was, with its token and position.
    from specdec_check.scenarios import VerifierScenario

    target = np.tile(np.array([[[1.0, 0.0], [0.0, 1.0]]]), (64, 1, 1))
    draft = np.tile(np.array([[[1.0, 0.0]]]), (64, 1, 1))
    scenario = VerifierScenario.from_rows("one-hot", target_probs=target, draft_probs=draft)
    report = check_verifier(entry("bonus_from_wrong_row").sampler, scenarios=[scenario], mode="quick",
                            checks=["batch_invariance"], seed=0)
    messages = [f.message for f in report.findings if f.kind == "failure"]
    assert messages == ["in a single-row call: 1 row(s) emitted a bonus token the target gives probability zero; "
                        "first: row 0 (token 0 at position 1, target probability 0)"], messages


@pytest.mark.parametrize("name", ["low-acceptance", "opposite-ranking", "draft-zeros"])
def test_pair_pits_of_joined_calls_are_those_of_one_block_per_call(name):
    """The independence check judges the calls of one pooled draw as one block (PairPits.add with ``windows``):
    every PIT value, and the draws of its randomizing uniforms, are those of one block per call."""
    from specdec_check.checker.chain.block import VerifierBlock
    from specdec_check.checker.chain.contract import parse_step
    from specdec_check.checker.chain.randomness import PairPits
    from specdec_check.scenarios import default_verifier_battery

    scenario = {s.name: s for s in default_verifier_battery()}[name]
    tables = scenario.law_tables()
    rows, calls = scenario.rows_per_call, 7
    draw = scenario.draw(np.random.default_rng(3), pool=scenario.prompts(), tables=tables, calls=calls)
    generator = np.random.default_rng(4)
    first, second = ([numpy_verify(draft_token_ids=w.draft_token_ids, draft_probs=w.draft_probs,
                                   target_probs=w.target_probs, generator=generator)
                      for w in (draw.head(slice(c * rows, (c + 1) * rows)) for c in range(calls))] for _ in range(2))
    apart, joined = PairPits(np.random.default_rng(5)), PairPits(np.random.default_rng(5))
    for c in range(calls):
        window = draw.head(slice(c * rows, (c + 1) * rows))
        block = VerifierBlock(window, conditional=True, tables=tables)
        apart.add(block, parse_step(first[c], window.draft_token_ids), parse_step(second[c], window.draft_token_ids))
    block = VerifierBlock(draw, conditional=True, tables=tables)
    joined.add(block, parse_step(np.concatenate(first), draw.draft_token_ids),
               parse_step(np.concatenate(second), draw.draft_token_ids), windows=[rows] * calls)
    for what, pair in apart.pairs().items():
        assert pair[0].size  # something to compare
        for side in (0, 1):
            np.testing.assert_array_equal(joined.pairs()[what][side], pair[side], err_msg=f"{what}, side {side}")
    assert apart.rng.random() == joined.rng.random()  # the same uniforms consumed
