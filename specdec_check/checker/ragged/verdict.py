"""From a ragged scenario's test records to findings that name requests, and its summary."""

from __future__ import annotations

from ..core.report import ScenarioSummary
from ..core.verdict import Wording, law_statistics

__all__ = ["RAGGED_OUTPUT_LAW_CHECKS", "RaggedWording", "ragged_summary"]

#: Law checks of random requests whose failure means the output law is wrong (not merely inefficient).
RAGGED_OUTPUT_LAW_CHECKS = ("first_token", "stop_conditional", "step_law")

_LAWS = {
    "first_token": "the first emitted token's law differs from the processed target law of the request's first row",
    "stop_conditional": "the final token's law given where the request stopped differs from the residual "
                        "norm(max(0, p - q)) or the bonus row of the processed target law",
    "step_law": "the joint law of (accepted drafts, final token) along the drafted path differs from the exact one",
}


def _most_deviant(record) -> tuple:
    """``(text, evidence)`` naming the request whose samples deviate most in a PIT record."""
    rows = record.details.get("requests") or []
    if not rows:
        return "", {}
    top = rows[0]
    text = (f"; most different: {top['description']} (its own PIT histogram: chi-square p = {top['pvalue']:.3g} over "
            f"{top['n']:,} samples)")
    return text, {"request": top["request"], "request_description": top["description"], "requests": rows}


def _acceptance_text(request_counts, describe) -> tuple:
    worst = request_counts.most_deviant()
    if worst is None:
        return "", {}
    return (f"; most different: {describe(worst['request'])}: first drafts accepted {worst['first_accepted']:.0f} "
            f"times vs {worst['first_expected']:.1f} expected (z = {worst['z']:+.1f}), {worst['accepted_per_step']:.3f} "
            f"drafts accepted per step vs {worst['expected_per_step']:.3f}"), dict(worst)


class RaggedWording(Wording):
    """How a ragged verifier's findings read: the chain's rules, with the request that deviates most named."""

    output_law_checks = RAGGED_OUTPUT_LAW_CHECKS

    def law_failure(self, ctx, record) -> tuple:
        text, evidence = _most_deviant(record)
        return (f"{_LAWS[record.check]} {law_statistics(record, of='samples of random requests')}" + text,
                {"pvalue": record.pvalue, "evalue": record.evalue, "n": record.n, "tv_plugin": record.tv_plugin,
                 "worst_cells": record.details.get("worst_cells", []), **evidence})

    def acceptance(self, ctx, counts) -> tuple:
        requests = counts.requests
        steps = max(requests.steps.sum(), 1)
        text, evidence = _acceptance_text(requests, ctx.scenario.describe_request)
        return counts.accepted_total / steps, counts.accepted_expected / steps, text, evidence

    def inefficient(self, ctx, measured, reference) -> str:
        return (f"lossless but inefficient: random requests accept {measured:.4f} drafts per step where the standard "
                f"rule accepts {reference:.4f} (sum min(p, q) on the processed laws)")

    def acceptance_failure(self, measured, reference, record) -> str:
        return (f"the accepted-count law of random requests differs from the exact one: {measured:.4f} drafts accepted "
                f"per step, exact {reference:.4f} (p = {record.pvalue:.3g})")

    def bonus_missing(self, missing):
        return (f"{missing} fully accepted random request(s) emitted no bonus token: lossless, but one token per fully "
                "accepted step is thrown away", {"requests_without_bonus": missing})


def ragged_summary(ctx, counts, request_counts, elapsed: float) -> ScenarioSummary:
    """Measured first-draft acceptance and tokens per random request beside their exact values."""
    s = ctx.scenario
    probs, repeats = counts.first_accept_probs()
    trials = int(repeats.sum())
    steps = int(request_counts.steps.sum())
    return ScenarioSummary(
        name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.max_draft_tokens,
        rows_per_call=s.num_requests, calls=ctx.calls, samples=ctx.samples,
        acceptance_measured=(counts.first_accepted / trials) if trials else None,
        acceptance_expected=float(probs @ repeats / trials) if trials else None,
        tokens_per_step_measured=(counts.emitted_total / steps) if steps else None,
        tokens_per_step_expected=(1.0 + counts.accepted_expected / steps) if steps else None,
        elapsed_s=elapsed, stopped_early=bool(ctx.stopped),
    )
