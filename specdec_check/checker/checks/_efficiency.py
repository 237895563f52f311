"""Efficiency: acceptances of the first drafts against the exact standard rule."""

from __future__ import annotations

from ... import stats
from .._kinds import PlannedTest
from .._report import TestRecord
from ._base import Check

__all__ = ["Efficiency"]


class Efficiency(Check):
    """The number of first drafts accepted against its exact Poisson-binomial law (each first draft
    is accepted with probability ``min(1, p/q)`` under the standard rule; Leviathan et al. 2023,
    Algorithm 1). A verifier that accepts significantly less while its output law passes is
    lossless but inefficient (see :func:`specdec_check.checker._verdict.classify`)."""

    power = "exact two-sided Poisson-binomial test over every first draft of the scenario's loop"

    @classmethod
    def plan(cls, scenario, selection) -> list:
        return [PlannedTest("efficiency", "efficiency")] if "efficiency" in selection and scenario.gamma else []

    def __init__(self, run, caller, counts):
        self.run, self.counts = run, counts

    def finish(self) -> None:
        run, counts = self.run, self.counts
        if run.stopped or "efficiency" not in run.planned or not counts.first_accept_groups:
            return
        probs, repeats = counts.first_accept_probs()
        alpha = run.spend("efficiency")
        res = stats.poisson_binomial_test(counts.first_accepted, probs, alpha=alpha, repeats=repeats)
        run.record(TestRecord(
            run.scenario.name, "efficiency", "exact Poisson-binomial (first-position acceptances)", not res.rejected,
            alpha, res.n, statistic=float(res.statistic), pvalue=float(res.pvalue),
            details={"accepted": int(counts.first_accepted), "expected": res.expected,
                     "accepted_per_step": counts.accepted_total / max(run.samples, 1),
                     "optimal_accepted_per_step": counts.accepted_expected / max(run.samples, 1)},
        ))
