"""Efficiency of a tree verifier: acceptances against the scheme's reference rule."""

from __future__ import annotations

from ... import stats
from ..checks.base import Check
from ..checks.efficiency import against_reference
from ..core.kind import PlannedTest
from ..core.report import TestRecord

__all__ = ["TreeEfficiency"]


class TreeEfficiency(Check):
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
    def plan(cls, scenario, options) -> list:
        return [PlannedTest("efficiency", "efficiency")] if "efficiency" in options.checks else []

    merged = True  # finishes on the counts merged over a split scenario's shards

    def finish(self) -> None:
        ctx, counts = self.ctx, self.counts
        probs = counts.probs()
        if ctx.stopped or "efficiency" not in ctx.planned or not probs.size:
            return
        if ctx.options.rule == "any":
            return self._against_reference()
        alpha = ctx.spend("efficiency")
        res = stats.poisson_binomial_test(counts.any_accepted, probs, alpha=alpha)
        ctx.recorder.record(TestRecord(
            ctx.scenario.name, "efficiency", "exact Poisson-binomial (rows accepting a root child)", not res.rejected,
            alpha, res.n, statistic=float(res.statistic), pvalue=float(res.pvalue),
            details={"accepted_rows": int(counts.any_accepted), "expected": res.expected,
                     "accepted_per_step": counts.accepted_total / max(ctx.samples, 1),
                     "optimal_accepted_per_step": counts.accepted_expected / max(ctx.samples, 1)},
        ))

    def _against_reference(self) -> None:
        ctx, counts = self.ctx, self.counts
        n = max(ctx.samples, 1)
        measured, reference = counts.accepted_total / n, counts.accepted_expected / n
        against_reference(
            ctx, measured=measured, reference=reference, span=ctx.scenario.depth,
            method="Hoeffding bound on accepted nodes per row against the reference rule's expectation",
            evidence={"accepted_per_step": measured, "standard_accepted_per_step": reference},
            below=f"accepts {measured:.4f} nodes per step where the scheme's reference rule accepts {reference:.4f}",
            above=f"accepts {measured:.4f} nodes per step, more than the scheme's reference rule ({reference:.4f})",
            better="a better rule than the reference")
