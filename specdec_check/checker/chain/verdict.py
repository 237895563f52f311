"""How a chain verifier's rejected tests read as findings, and its scenario summary."""

from __future__ import annotations

from ..core.planning import achieved_resolution
from ..core.report import ScenarioSummary
from ..core.verdict import Wording

__all__ = ["ACCEPTANCE_CHECKS", "ChainWording", "OUTPUT_LAW_CHECKS", "verifier_summary"]

#: Law checks whose failure means the output law is wrong (not merely inefficient).
OUTPUT_LAW_CHECKS = ("first_token", "stop_conditional", "step_law", "batch_invariance", "completed")
#: Checks of how often drafts are accepted: alone, their failure means lossless but inefficient.
ACCEPTANCE_CHECKS = ("accepted_count", "efficiency")


class ChainWording(Wording):
    """How a chain verifier's findings from rejected tests read (:func:`specdec_check.checker.core.verdict.classify`)."""

    output_law_checks = OUTPUT_LAW_CHECKS
    acceptance_checks = ACCEPTANCE_CHECKS

    def inefficient(self, ctx, measured, reference) -> str:
        return (f"{_no_loss(ctx)}, but inefficient: accepts {measured:.4f} drafts per step where the standard rule "
                f"accepts {reference:.4f} (sum min(p, q) along each path)")

    def acceptance_failure(self, measured, reference, record) -> str:
        return (f"the accepted-count law differs from the exact one: accepts {measured:.4f} drafts per step, exact "
                f"{reference:.4f} (p = {record.pvalue:.3g})")

    def bonus_missing(self, missing):
        return (f"{missing} fully accepted step(s) emitted no bonus token: one token per fully accepted step is thrown "
                "away (dropping it biases none of the emitted tokens)", {"rows_without_bonus": missing})


def _no_loss(ctx) -> str:
    """What the law tests say about loss, in words they support ("lossless" only at the design TV)."""
    resolution = achieved_resolution(ctx.recorder.records)
    if resolution is None:
        return "the output law was not tested here"
    if resolution <= ctx.mode.design_tv:
        return f"lossless as far as the law tests see (they could detect a TV of {resolution:.3g})"
    return (f"no loss detected, at a coarse resolution only (a TV of {resolution:.3g}, short of the design "
            f"{ctx.mode.design_tv:g})")


def verifier_summary(ctx, counts, elapsed: float) -> ScenarioSummary:
    """A verifier scenario's measured acceptance and tokens per step beside their exact values."""
    s = ctx.scenario
    probs, repeats = counts.first_accept_probs()
    trials = int(repeats.sum())
    n = max(ctx.samples, 1)
    return ScenarioSummary(
        name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.gamma,
        rows_per_call=s.rows_per_call, calls=ctx.calls, samples=ctx.samples,
        acceptance_measured=(counts.first_accepted / trials) if trials else None,
        acceptance_expected=float(probs @ repeats / trials) if trials else None,
        tokens_per_step_measured=counts.emitted_total / n,
        tokens_per_step_expected=1.0 + counts.accepted_expected / n,
        accepted_per_step=counts.accepted_total / n if ctx.samples else None,
        standard_accepted_per_step=counts.accepted_expected / n if ctx.samples else None,
        optimal_accepted_per_step=counts.optimal_expected / n if ctx.samples else None,
        elapsed_s=elapsed, stopped_early=bool(ctx.stopped),
    )
