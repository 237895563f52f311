"""From test records to findings and summaries: what a scenario's results mean."""

from __future__ import annotations

from ._report import ScenarioSummary
from ._tally import law_evidence

__all__ = ["OUTPUT_LAW_CHECKS", "classify", "verifier_summary"]

#: Law checks whose failure means the output law is wrong (not merely inefficient).
OUTPUT_LAW_CHECKS = ("first_token", "stop_conditional", "step_law", "batch_invariance", "completed")
#: Checks of how often drafts are accepted: alone, their failure means lossless but inefficient.
ACCEPTANCE_CHECKS = ("accepted_count", "efficiency")


def classify(run, counts) -> None:
    """Turn a verifier scenario's rejected tests into findings.

    A rejected output-law test is a failure. A rejected acceptance test is a failure too, unless
    every output-law test passed and the verifier accepts less than the standard rule: then it is
    lossless but inefficient. Fully accepted steps without a bonus token are an inefficiency.
    """
    acceptance_checks = ACCEPTANCE_CHECKS if run.options.rule == "standard" else ()  # "any": judged by the check
    records = [r for r in run.records if r.check in OUTPUT_LAW_CHECKS + acceptance_checks]
    output_law_bad = [r for r in records if r.check in OUTPUT_LAW_CHECKS and not r.passed]
    acceptance_bad = [r for r in records if r.check in acceptance_checks and not r.passed]
    measured = counts.accepted_total / max(run.samples, 1)
    optimal = counts.accepted_expected / max(run.samples, 1)
    for r in output_law_bad:
        run.fail(r.check, f"the output law differs from the exact law ({r.method}): p = {r.pvalue:.3g}"
                 + (f", e-value {r.evalue:.3g}" if r.evalue is not None else "")
                 + f", plug-in TV {r.tv_plugin:.3g} over {r.n:,} samples" + law_evidence(r),
                 {"pvalue": r.pvalue, "evalue": r.evalue, "n": r.n, "worst_cells": r.details.get("worst_cells", []),
                  "worst_tokens": r.details.get("worst_tokens", []), "tv_plugin": r.tv_plugin})
    if acceptance_bad:
        if not output_law_bad and measured < optimal:
            run.fail("efficiency", f"{_no_loss(run)}, but inefficient: accepts {measured:.4f} drafts per step where "
                     f"the standard rule accepts {optimal:.4f} (sum min(p, q) along each path)",
                     {"accepted_per_step": measured, "optimal": optimal,
                      "pvalues": [r.pvalue for r in acceptance_bad]}, kind="inefficiency")
        else:
            for r in acceptance_bad:
                run.fail(r.check, f"the accepted-count law differs from the exact one: accepts {measured:.4f} "
                         f"drafts per step, exact {optimal:.4f} (p = {r.pvalue:.3g})",
                         {"accepted_per_step": measured, "optimal": optimal, "pvalue": r.pvalue})
    if counts.bonus_missing:
        run.fail("efficiency", f"{counts.bonus_missing} fully accepted step(s) emitted no bonus token: one token per "
                 "fully accepted step is thrown away (dropping it biases none of the emitted tokens)",
                 {"rows_without_bonus": counts.bonus_missing}, kind="inefficiency")


def _no_loss(run) -> str:
    """What the law tests say about loss, in words they support ("lossless" only at the design TV)."""
    from ._session import achieved_resolution

    resolution = achieved_resolution(run.records)
    if resolution is None:
        return "the output law was not tested here"
    if resolution <= run.mode.design_tv:
        return f"lossless as far as the law tests see (they could detect a TV of {resolution:.3g})"
    return f"no loss detected, at a coarse resolution only (a TV of {resolution:.3g}, short of the design {run.mode.design_tv:g})"


def verifier_summary(run, counts, elapsed: float) -> ScenarioSummary:
    """A verifier scenario's measured acceptance and tokens per step beside their exact values."""
    s = run.scenario
    probs, repeats = counts.first_accept_probs()
    trials = int(repeats.sum())
    n = max(run.samples, 1)
    return ScenarioSummary(
        name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.gamma,
        rows_per_call=s.rows_per_call, calls=run.calls, samples=run.samples,
        acceptance_measured=(counts.first_accepted / trials) if trials else None,
        acceptance_expected=float(probs @ repeats / trials) if trials else None,
        tokens_per_step_measured=counts.emitted_total / n,
        tokens_per_step_expected=1.0 + counts.accepted_expected / n,
        accepted_per_step=counts.accepted_total / n if run.samples else None,
        standard_accepted_per_step=counts.accepted_expected / n if run.samples else None,
        optimal_accepted_per_step=counts.optimal_expected / n if run.samples else None,
        elapsed_s=elapsed, stopped_early=bool(run.stopped),
    )
