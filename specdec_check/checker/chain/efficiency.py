"""Efficiency: acceptances of the first drafts against the exact standard rule."""

from __future__ import annotations

import numpy as np

from ... import stats
from ..checks.base import Check
from ..checks.efficiency import against_reference
from ..core.kind import PlannedTest
from ..core.report import TestRecord

__all__ = ["Efficiency"]


class Efficiency(Check):
    """Acceptances against the standard rule.

    Under ``rule="standard"``: the number of first drafts accepted against its exact
    Poisson-binomial law (each first draft is accepted with probability ``min(1, p/q)``;
    Leviathan et al. 2023, Algorithm 1). A verifier that accepts significantly less while its
    output law passes is lossless but inefficient (see :func:`specdec_check.checker.chain.verdict.classify`).

    Under ``rule="any"``: the accepted drafts of every row against the standard rule's exact
    expectation on that row, two-sided (Hoeffding 1963: ``|sum_b (K_b - E_b)| >= gamma
    sqrt(n ln(2/alpha) / 2)``, each ``K_b`` in ``[0, gamma]`` and independent given the drafts).
    Below it: inefficient; above it: a rule better than the standard one (information). The
    optimum among valid verifiers (block verification, Sun et al., ICLR 2025) is reported beside,
    and tested: no valid verifier accepts more drafts in expectation over drafts than block
    verification (Sun et al. 2025, Theorem 2), so on fresh rows (drafts drawn from the draft model)
    the excess ``D = K - E_block[K | drafts]`` has mean at most 0. A mean significantly above 0 by
    the empirical Bernstein bound (Maurer & Pontil 2009, Theorem 4, on ``D`` in ``[-gamma, gamma]``)
    is a failure: the rule accepts more than any lossless rule can, so its output law is not exact.
    """

    power = ("standard: exact two-sided Poisson-binomial test over every first draft; any: Hoeffding's bound on "
             "the accepted drafts of every row, and the empirical Bernstein bound on their excess over the optimum")

    @classmethod
    def plan(cls, scenario, options) -> list:
        if "efficiency" not in options.checks or not scenario.gamma:
            return []
        optimum = [PlannedTest("optimum", "efficiency")] if options.rule == "any" else []
        return [PlannedTest("efficiency", "efficiency"), *optimum]

    merged = True  # finishes on the step counts merged over a split scenario's shards

    def finish(self) -> None:
        ctx, counts = self.ctx, self.counts
        if ctx.stopped or "efficiency" not in ctx.planned or not counts.first_accept_groups:
            return
        if ctx.options.rule == "any":
            above_optimum = self._against_optimum()
            return self._against_standard(above_optimum)
        probs, repeats = counts.first_accept_probs()
        alpha = ctx.spend("efficiency")
        res = stats.poisson_binomial_test(counts.first_accepted, probs, alpha=alpha, repeats=repeats)
        ctx.recorder.record(TestRecord(
            ctx.scenario.name, "efficiency", "exact Poisson-binomial (first-position acceptances)", not res.rejected,
            alpha, res.n, statistic=float(res.statistic), pvalue=float(res.pvalue),
            details={"accepted": int(counts.first_accepted), "expected": res.expected,
                     "accepted_per_step": counts.accepted_total / max(ctx.samples, 1),
                     "standard_accepted_per_step": counts.accepted_expected / max(ctx.samples, 1),
                     "optimal_accepted_per_step": counts.optimal_expected / max(ctx.samples, 1)},
        ))

    def _against_standard(self, above_optimum: bool = False) -> None:
        ctx, counts = self.ctx, self.counts
        n = max(ctx.samples, 1)
        measured, standard, optimal = (counts.accepted_total / n, counts.accepted_expected / n,
                                       counts.optimal_expected / n)
        against_reference(
            ctx, measured=measured, reference=standard, span=ctx.scenario.gamma,
            method="Hoeffding bound on accepted drafts per row against the standard rule's expectation",
            evidence={"accepted_per_step": measured, "standard_accepted_per_step": standard,
                      "optimal_accepted_per_step": optimal},
            below=f"accepts {measured:.4f} drafts per step where the standard rule accepts {standard:.4f} (the "
                  f"optimum, block verification, {optimal:.4f})",
            above=f"accepts {measured:.4f} drafts per step, more than the standard rule's {standard:.4f} (the "
                  f"optimum, block verification, accepts {optimal:.4f})",
            better="a better rule than the standard one",
            may_be_better=not above_optimum)  # above the optimum is a failure, not a better rule

    def _against_optimum(self) -> bool:
        """Fresh rows' mean excess over block verification's expectation, one-sided (Sun et al. 2025,
        Theorem 2: the optimum in expectation over drafts). Empirical Bernstein (Maurer & Pontil 2009,
        Theorem 4) for ``X = (D + gamma) / (2 gamma)`` in ``[0, 1]``: with probability at least
        ``1 - alpha``, ``E[D] >= mean(D) - sqrt(2 V ln(2/alpha) / n) - 14 gamma ln(2/alpha) / (3 (n - 1))``
        with ``V`` the unbiased sample variance of ``D``. A positive lower bound fails the run; returns
        whether it did."""
        ctx, counts, s = self.ctx, self.counts, self.ctx.scenario
        if "optimum" not in ctx.planned:
            return False
        alpha = ctx.spend("optimum")
        n = counts.excess_rows
        if n < 2:
            ctx.recorder.skipped("optimum", f"{n} fresh row(s): the bound needs two")
            return False
        mean = counts.excess_sum / n
        variance = max(0.0, (counts.excess_square - n * mean * mean) / (n - 1))
        log_term = np.log(2.0 / alpha)
        margin = float(np.sqrt(2.0 * variance * log_term / n) + 14.0 * s.gamma * log_term / (3.0 * (n - 1)))
        passed = mean - margin <= 0.0
        evidence = {"excess_per_step": float(mean), "margin": margin, "rows": int(n),
                    "optimal_accepted_per_step": counts.optimal_expected / max(ctx.samples, 1),
                    "accepted_per_step": counts.accepted_total / max(ctx.samples, 1)}
        ctx.recorder.record(TestRecord(
            s.name, "optimum", "empirical Bernstein bound on accepted drafts above block verification's expectation "
            "(fresh rows)", bool(passed), alpha, int(n), statistic=float(mean), details=evidence,
        ))
        if not passed:
            ctx.recorder.failure("efficiency", f"accepts {mean:+.4f} drafts per step more than block verification's "
                                 f"expectation on the same drafts (bound {margin:.4f} over {n:,} fresh rows): no "
                                 "lossless rule accepts more than block verification in expectation (Sun et al., "
                                 "ICLR 2025, Theorem 2), so the output law is not exact", evidence)
        return not passed
