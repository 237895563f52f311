"""Efficiency of a tree verifier: acceptances against the scheme's reference rule."""

from __future__ import annotations

import numpy as np

from ... import stats
from .._kinds import PlannedTest
from .._report import TestRecord

__all__ = ["TreeEfficiency"]


class TreeEfficiency:
    """Acceptances against the scheme's reference rule, multi-round rejection sampling (Miao et al.
    2023, Algorithm 2; Jeon et al. 2024).

    Under ``rule="standard"``: the number of rows that accept at least one node against its exact
    Poisson-binomial law (a row accepts a root child with probability ``1 - P(stop at the root)``).
    A verifier that accepts less while its output laws pass is lossless but inefficient.

    Under ``rule="any"``: the accepted nodes of every row against the reference rule's exact
    expectation on that row's tree, two-sided (Hoeffding 1963: ``|sum_b (K_b - E_b)| >= D
    sqrt(n ln(2/alpha) / 2)``, each ``K_b`` in ``[0, D]``, D the scenario's depth, independent given
    the trees). Below it: inefficient; above it: a rule that accepts more than the reference
    (information).
    """

    power = ("standard: exact two-sided Poisson-binomial test over every row of the scenario's loop; any: "
             "Hoeffding's bound on the accepted nodes of every row")

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
        if run.options.rule == "any":
            return self._against_reference()
        alpha = run.spend("efficiency")
        res = stats.poisson_binomial_test(counts.any_accepted, probs, alpha=alpha)
        run.record(TestRecord(
            run.scenario.name, "efficiency", "exact Poisson-binomial (rows accepting a root child)", not res.rejected,
            alpha, res.n, statistic=float(res.statistic), pvalue=float(res.pvalue),
            details={"accepted_rows": int(counts.any_accepted), "expected": res.expected,
                     "accepted_per_step": counts.accepted_total / max(run.samples, 1),
                     "optimal_accepted_per_step": counts.accepted_expected / max(run.samples, 1)},
        ))

    def _against_reference(self) -> None:
        run, counts, s = self.run, self.counts, self.run.scenario
        alpha = run.spend("efficiency")
        n = max(run.samples, 1)
        measured, reference = counts.accepted_total / n, counts.accepted_expected / n
        margin = s.depth * np.sqrt(np.log(2.0 / alpha) / (2.0 * n))  # on the mean of n rows
        passed = measured > reference - margin  # accepting more than the reference rule is no inefficiency
        evidence = {"accepted_per_step": measured, "standard_accepted_per_step": reference, "margin": float(margin)}
        run.record(TestRecord(
            s.name, "efficiency", "Hoeffding bound on accepted nodes per row against the reference rule's expectation",
            bool(passed), alpha, int(run.samples), statistic=float(measured - reference), details=dict(evidence),
        ))
        if measured <= reference - margin:
            run.fail("efficiency", f"accepts {measured:.4f} nodes per step where the scheme's reference rule accepts "
                     f"{reference:.4f}", evidence, kind="inefficiency")
        elif measured >= reference + margin:
            run.fail("efficiency", f"accepts {measured:.4f} nodes per step, more than the scheme's reference rule "
                     f"({reference:.4f}): a better rule than the reference", evidence, kind="nonstandard")
