"""The run-level conclusion from per-scenario evidence: core.verdict.evidence_gaps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import pytest

from specdec_check.checker.core.verdict import evidence_gaps


def _summary(name, achieved_tv, samples=1000, calls=10):
    return SimpleNamespace(name=name, achieved_tv=achieved_tv, samples=samples, calls=calls)


@pytest.mark.parametrize("achieved, gap", [(0.0599, False), (0.06, False), (0.0601, True), (0.1, True), (1.0, True)])
def test_a_scenario_short_of_the_design_tv_is_a_gap(achieved, gap):
    """A scenario whose law tests could not detect the design TV leaves the run inconclusive, however
    little it misses by (the design TV is the promise; nothing rounds it)."""
    gaps = evidence_gaps([_summary("a", 0.01), _summary("b", achieved)], 0.06)
    assert [name for name, _ in gaps] == (["b"] if gap else [])
    if gap:
        assert f"TV of {achieved:.3g}" in gaps[0][1] and "design TV 0.06" in gaps[0][1]


def test_no_law_test_anywhere_is_one_gap_for_the_whole_run():
    assert [n for n, _ in evidence_gaps([_summary("a", None), _summary("b", None)], 0.06)] == ["(all)"]
    assert evidence_gaps([_summary("a", None), _summary("b", 0.05)], 0.06) == ()


@pytest.mark.parametrize("rows, within", [(1, False), (2, True), (3, True)])
def test_calls_of_two_or_more_rows_plan_the_within_call_independence_test(rows, within):
    """Rows of one call must be independent: any call that holds a pair of rows (two rows included) gets
    the within-call collision test, besides the across-calls one."""
    from specdec_check.checker.checks.randomness import independence_tests

    names = [t.name for t in independence_tests(SimpleNamespace(rows_per_call=rows))]
    assert names == ["independence_calls"] + (["independence_rows"] if within else [])


class _Recorder:
    """The two calls classify makes, kept as (kind, check) pairs, over a fixed list of test records."""

    def __init__(self, records):
        self.records, self.findings = records, []

    def failure(self, check, message, evidence=None):
        self.findings.append(("failure", check))

    def inefficiency(self, check, message, evidence=None):
        self.findings.append(("inefficiency", check))


class _Wording:
    output_law_checks = ("first_token",)
    acceptance_checks = ("accepted_count",)

    def law_failure(self, ctx, record):
        return "law", {}

    def acceptance(self, ctx, counts):
        return counts.measured, counts.reference, "", {}

    def inefficient(self, ctx, measured, reference):
        return "inefficient"

    def acceptance_failure(self, measured, reference, record):
        return "acceptance"

    def bonus_missing(self, missing):
        return None


def _classify(rule, *, law_passed, measured, reference=1.0):
    from specdec_check.checker.core.verdict import classify

    records = [SimpleNamespace(check="first_token", passed=law_passed, pvalue=0.5 if law_passed else 1e-9),
               SimpleNamespace(check="accepted_count", passed=False, pvalue=1e-9)]
    ctx = SimpleNamespace(recorder=_Recorder(records), options=SimpleNamespace(rule=rule))
    classify(ctx, SimpleNamespace(measured=measured, reference=reference), _Wording())
    return ctx.recorder.findings


@pytest.mark.parametrize("law_passed, measured, expected", [
    (True, 0.8, [("inefficiency", "efficiency")]),                 # exact law, accepts less: lossless, slow
    (True, 1.2, [("failure", "accepted_count")]),                  # accepts more than optimal: impossible if exact
    (False, 0.8, [("failure", "first_token"), ("failure", "accepted_count")]),  # law wrong: never "inefficient"
])
def test_a_rejected_acceptance_test_is_an_inefficiency_only_when_the_law_is_exact_and_it_accepts_less(
        law_passed, measured, expected):
    assert _classify("standard", law_passed=law_passed, measured=measured) == expected


def test_under_rule_any_the_acceptance_count_is_not_judged_against_the_standard_rule():
    """A lossless rule other than the standard one may accept at any rate: only its law is judged."""
    assert _classify("any", law_passed=True, measured=0.5) == []
    assert _classify("any", law_passed=False, measured=0.5) == [("failure", "first_token")]


class _LedgerRecorder(_Recorder):
    def __init__(self):
        super().__init__([])

    def record(self, record):
        self.records.append(record)


@pytest.mark.parametrize("hits", [0, 1, 3, 6])
def test_the_collision_test_p_value_is_the_exact_binomial_tail_of_the_pair_probabilities(hits):
    """With ten pairs each colliding with probability 0.1 under independence, the one-sided p-value of
    ``hits`` collisions is P(Binomial(10, 0.1) >= hits), and the expected count is 1.0 (probabilities a
    rounding error above 1 are clipped, never doubled or dropped)."""
    from scipy.stats import binom

    from specdec_check.checker.checks.randomness import collision_verdict

    ctx = SimpleNamespace(scenario=SimpleNamespace(name="s"), recorder=_LedgerRecorder())
    probs = np.array([0.1] * 10 + [1.0 + 1e-15])
    rejected = collision_verdict(ctx, "independence", "calls", hits + 1, probs, 1e-3)
    (record,) = ctx.recorder.records
    assert record.details["expected"] == pytest.approx(2.0)
    assert record.pvalue == pytest.approx(binom.sf(hits - 1, 10, 0.1), rel=1e-9)
    assert rejected == (record.pvalue <= 1e-3) == (ctx.recorder.findings == [("failure", "independence")])


def test_the_advice_of_a_gap_names_only_what_this_user_can_do():
    """More rows per call only for a scenario the user wrote; the next mode (or a coarser --tv in
    thorough) for a built-in one; nothing to do where the scenario stopped at its failure."""
    summaries = [_summary("mine", 0.2), _summary("builtin", 0.2), _summary("broken", 0.2)]
    gaps = dict(evidence_gaps(summaries, 0.06, own={"mine"}, failed={"broken"}, mode="default"))
    assert gaps["mine"].endswith("give it more rows per call, or run --mode thorough")
    assert gaps["builtin"].endswith(": run --mode thorough") and "rows per call" not in gaps["builtin"]
    assert "stopped at its failure" in gaps["broken"] and "thorough" not in gaps["broken"]
    thorough = dict(evidence_gaps(summaries[1:2], 0.02, mode="thorough"))
    assert thorough["builtin"].endswith("set a coarser --tv")
