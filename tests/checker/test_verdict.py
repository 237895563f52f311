"""The run-level conclusion from per-scenario evidence: core.verdict.evidence_gaps."""

from __future__ import annotations

from types import SimpleNamespace

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
