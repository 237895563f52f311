"""Efficiency of a tree verifier: rows accepting at least one node against the reference rule."""

from __future__ import annotations

from ... import stats
from .._kinds import PlannedTest
from .._report import TestRecord

__all__ = ["TreeEfficiency"]


class TreeEfficiency:
    """The number of rows that accept at least one node against its exact Poisson-binomial law: under the
    reference rule of the scheme a row accepts a root child with probability ``1 - P(stop at the root)``
    (multi-round rejection sampling, Miao et al. 2023, Algorithm 2). A verifier that accepts less while
    its output laws pass is lossless but inefficient."""

    power = "exact two-sided Poisson-binomial test over every row of the scenario's loop"

    @classmethod
    def plan(cls, scenario, selection) -> list:
        return [PlannedTest("efficiency", "efficiency")] if "efficiency" in selection else []

    def __init__(self, run, counts):
        self.run, self.counts = run, counts

    def finish(self) -> None:
        run, counts = self.run, self.counts
        probs = counts.probs()
        if run.stopped or "efficiency" not in run.planned or not probs.size:
            return
        alpha = run.spend("efficiency")
        res = stats.poisson_binomial_test(counts.any_accepted, probs, alpha=alpha)
        run.record(TestRecord(
            run.scenario.name, "efficiency", "exact Poisson-binomial (rows accepting a root child)", not res.rejected,
            alpha, res.n, statistic=float(res.statistic), pvalue=float(res.pvalue),
            details={"accepted_rows": int(counts.any_accepted), "expected": res.expected,
                     "accepted_per_step": counts.accepted_total / max(run.samples, 1),
                     "optimal_accepted_per_step": counts.accepted_expected / max(run.samples, 1)},
        ))
