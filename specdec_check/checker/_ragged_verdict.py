"""From a ragged scenario's test records to findings that name requests, and its summary."""

from __future__ import annotations

from ._report import ScenarioSummary
from ._verdict import ACCEPTANCE_CHECKS

__all__ = ["RAGGED_OUTPUT_LAW_CHECKS", "classify_ragged", "ragged_summary"]

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


def classify_ragged(run, counts, request_counts) -> None:
    """Turn a ragged scenario's rejected law and acceptance tests into findings (the chain's rules,
    :func:`specdec_check.checker._verdict.classify`, with the request that deviates most named)."""
    s = run.scenario
    records = [r for r in run.records if r.check in RAGGED_OUTPUT_LAW_CHECKS + ACCEPTANCE_CHECKS]
    law_bad = [r for r in records if r.check in RAGGED_OUTPUT_LAW_CHECKS and not r.passed]
    acceptance_bad = [r for r in records if r.check in ACCEPTANCE_CHECKS and not r.passed]
    measured = counts.accepted_total / max(request_counts.steps.sum(), 1)
    optimal = counts.accepted_expected / max(request_counts.steps.sum(), 1)
    for r in law_bad:
        text, evidence = _most_deviant(r)
        run.fail(r.check, f"{_LAWS[r.check]} ({r.method}): p = {r.pvalue:.3g}"
                 + (f", e-value {r.evalue:.3g}" if r.evalue is not None else "")
                 + f", plug-in TV {r.tv_plugin:.3g} over {r.n:,} samples of random requests" + text,
                 {"pvalue": r.pvalue, "evalue": r.evalue, "n": r.n, "tv_plugin": r.tv_plugin,
                  "worst_cells": r.details.get("worst_cells", []), **evidence})
    if acceptance_bad:
        text, evidence = _acceptance_text(request_counts, s.describe_request)
        if not law_bad and measured < optimal:
            run.fail("efficiency", f"lossless but inefficient: random requests accept {measured:.4f} drafts per step "
                     f"where the standard rule accepts {optimal:.4f} (sum min(p, q) on the processed laws)" + text,
                     {"accepted_per_step": measured, "optimal": optimal,
                      "pvalues": [r.pvalue for r in acceptance_bad], **evidence}, kind="inefficiency")
        else:
            for r in acceptance_bad:
                run.fail(r.check, f"the accepted-count law of random requests differs from the exact one: "
                         f"{measured:.4f} drafts accepted per step, exact {optimal:.4f} (p = {r.pvalue:.3g})" + text,
                         {"accepted_per_step": measured, "optimal": optimal, "pvalue": r.pvalue, **evidence})
    if counts.bonus_missing:
        run.fail("efficiency", f"{counts.bonus_missing} fully accepted random request(s) emitted no bonus token: "
                 "lossless, but one token per fully accepted step is thrown away",
                 {"requests_without_bonus": counts.bonus_missing}, kind="inefficiency")


def ragged_summary(run, counts, request_counts, elapsed: float) -> ScenarioSummary:
    """Measured first-draft acceptance and tokens per random request beside their exact values."""
    s = run.scenario
    probs, repeats = counts.first_accept_probs()
    trials = int(repeats.sum())
    steps = int(request_counts.steps.sum())
    return ScenarioSummary(
        name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.max_draft_tokens,
        rows_per_call=s.num_requests, calls=run.calls, samples=run.samples,
        acceptance_measured=(counts.first_accepted / trials) if trials else None,
        acceptance_expected=float(probs @ repeats / trials) if trials else None,
        tokens_per_step_measured=(counts.emitted_total / steps) if steps else None,
        tokens_per_step_expected=(1.0 + counts.accepted_expected / steps) if steps else None,
        elapsed_s=elapsed, stopped_early=bool(run.stopped),
    )
