"""Efficiency: acceptances of the first drafts against the exact standard rule."""

from __future__ import annotations

import numpy as np

from ... import stats
from .._kinds import PlannedTest
from .._report import TestRecord
from ._base import Check

__all__ = ["Efficiency"]


class Efficiency(Check):
    """Acceptances against the standard rule.

    Under ``rule="standard"``: the number of first drafts accepted against its exact
    Poisson-binomial law (each first draft is accepted with probability ``min(1, p/q)``;
    Leviathan et al. 2023, Algorithm 1). A verifier that accepts significantly less while its
    output law passes is lossless but inefficient (see :func:`specdec_check.checker._verdict.classify`).

    Under ``rule="any"``: the accepted drafts of every row against the standard rule's exact
    expectation on that row, two-sided (Hoeffding 1963: ``|sum_b (K_b - E_b)| >= gamma
    sqrt(n ln(2/alpha) / 2)``, each ``K_b`` in ``[0, gamma]`` and independent given the drafts).
    Below it: inefficient; above it: a rule better than the standard one (information). The
    optimum among valid verifiers (block verification, Sun et al., ICLR 2025) is reported beside.
    """

    power = ("standard: exact two-sided Poisson-binomial test over every first draft; any: Hoeffding's bound on "
             "the accepted drafts of every row")

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        return [PlannedTest("efficiency", "efficiency")] if "efficiency" in selection and scenario.gamma else []

    def __init__(self, run, caller, counts):
        self.run, self.counts = run, counts

    def finish(self) -> None:
        run, counts = self.run, self.counts
        if run.stopped or "efficiency" not in run.planned or not counts.first_accept_groups:
            return
        if run.options.rule == "any":
            return self._against_standard()
        probs, repeats = counts.first_accept_probs()
        alpha = run.spend("efficiency")
        res = stats.poisson_binomial_test(counts.first_accepted, probs, alpha=alpha, repeats=repeats)
        run.record(TestRecord(
            run.scenario.name, "efficiency", "exact Poisson-binomial (first-position acceptances)", not res.rejected,
            alpha, res.n, statistic=float(res.statistic), pvalue=float(res.pvalue),
            details={"accepted": int(counts.first_accepted), "expected": res.expected,
                     "accepted_per_step": counts.accepted_total / max(run.samples, 1),
                     "standard_accepted_per_step": counts.accepted_expected / max(run.samples, 1),
                     "optimal_accepted_per_step": counts.optimal_expected / max(run.samples, 1)},
        ))

    def _against_standard(self) -> None:
        run, counts, s = self.run, self.counts, self.run.scenario
        alpha = run.spend("efficiency")
        n = max(run.samples, 1)
        measured, standard, optimal = (counts.accepted_total / n, counts.accepted_expected / n,
                                       counts.optimal_expected / n)
        margin = s.gamma * np.sqrt(np.log(2.0 / alpha) / (2.0 * n))  # on the mean of n rows
        passed = measured > standard - margin  # accepting more than the standard rule is no inefficiency
        run.record(TestRecord(
            s.name, "efficiency", "Hoeffding bound on accepted drafts per row against the standard rule's expectation",
            bool(passed), alpha, int(run.samples), statistic=float(measured - standard),
            details={"accepted_per_step": measured, "standard_accepted_per_step": standard,
                     "optimal_accepted_per_step": optimal, "margin": float(margin)},
        ))
        evidence = {"accepted_per_step": measured, "standard_accepted_per_step": standard,
                    "optimal_accepted_per_step": optimal, "margin": float(margin)}
        if measured <= standard - margin:
            run.fail("efficiency", f"accepts {measured:.4f} drafts per step where the standard rule accepts "
                     f"{standard:.4f} (the optimum, block verification, {optimal:.4f})", evidence, kind="inefficiency")
        elif measured >= standard + margin:
            run.fail("efficiency", f"accepts {measured:.4f} drafts per step, more than the standard rule's {standard:.4f} "
                     f"(the optimum, block verification, accepts {optimal:.4f}): a better rule than the standard one",
                     evidence, kind="nonstandard")
