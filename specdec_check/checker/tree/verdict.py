"""How a tree verifier's rejected tests read as findings, and its scenario summary."""

from __future__ import annotations

from ..core.report import ScenarioSummary
from ..core.tally import law_evidence
from ..core.verdict import Wording, law_statistics

__all__ = ["ACCEPTANCE_CHECKS", "OUTPUT_LAW_CHECKS", "TreeWording", "tree_summary"]

#: Law checks whose failure means the output law is wrong (not merely inefficient).
OUTPUT_LAW_CHECKS = ("first_token", "final_token", "sequence_law", "completed")
#: Checks of how often nodes are accepted: alone, their failure means lossless but inefficient.
ACCEPTANCE_CHECKS = ("accepted_length", "efficiency")


class TreeWording(Wording):
    """How a tree verifier's findings from rejected tests read (:func:`specdec_check.checker.core.verdict.classify`)."""

    output_law_checks = OUTPUT_LAW_CHECKS
    acceptance_checks = ACCEPTANCE_CHECKS

    def law_failure(self, ctx, record) -> tuple:
        where = record.details.get("test", record.check)
        return (f"the {where} law differs from the exact law {law_statistics(record)}" + law_evidence(record),
                {"test": where, "pvalue": record.pvalue, "evalue": record.evalue, "n": record.n,
                 "worst_cells": record.details.get("worst_cells", []),
                 "worst_tokens": record.details.get("worst_tokens", []), "tv_plugin": record.tv_plugin})

    def inefficient(self, ctx, measured, reference) -> str:
        return f"lossless but inefficient: accepts {measured:.4f} nodes per step where the reference rule accepts {reference:.4f}"

    def acceptance_failure(self, measured, reference, record) -> str:
        return (f"the accepted-length law differs from the exact one: accepts {measured:.4f} nodes per step, exact "
                f"{reference:.4f} (p = {record.pvalue:.3g})")


def tree_summary(ctx, counts, elapsed) -> ScenarioSummary:
    s = ctx.scenario
    probs = counts.probs()
    n = max(ctx.samples, 1)
    return ScenarioSummary(
        name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.depth,
        rows_per_call=s.rows_per_call, calls=ctx.calls, samples=ctx.samples,
        acceptance_measured=(counts.any_accepted / probs.size) if probs.size else None,
        acceptance_expected=float(probs.mean()) if probs.size else None,
        tokens_per_step_measured=counts.emitted_total / n, tokens_per_step_expected=1.0 + counts.accepted_expected / n,
        accepted_per_step=counts.accepted_total / n if ctx.samples else None,
        standard_accepted_per_step=counts.accepted_expected / n if ctx.samples else None,
        elapsed_s=elapsed, stopped_early=bool(ctx.stopped),
    )
