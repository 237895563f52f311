"""Acceptance against the reference rule's exact expectation, two-sided, for any kind judged under rule="any"."""

from __future__ import annotations

import numpy as np

from ..core.report import TestRecord

__all__ = ["against_reference", "law_failed"]


def law_failed(ctx) -> bool:
    """Whether the scenario's output law is already known to be wrong: a failure, or a rejected record of one
    of the kind's output-law checks (before ``Classify`` turns it into a finding)."""
    laws = ctx.kind.output_law_checks
    return ctx.recorder.failed() or any(not r.passed for r in ctx.recorder.records if r.check in laws)


def against_reference(ctx, *, measured: float, reference: float, span: int, method: str, evidence: dict,
                      below: str, above: str, better: str, may_be_better: bool = True) -> None:
    """The mean accepted count per row (``measured``) against the reference rule's exact expectation on the
    same rows (``reference``), two-sided by Hoeffding (1963): each row's count lies in ``[0, span]`` and rows are
    independent given their inputs, so ``|mean - reference| >= span sqrt(ln(2 / alpha) / (2 n))`` has probability
    at most alpha. Below: lossless but inefficient (the finding says ``below``). Above: information (``above``),
    "a better rule" (``better``) only when the scenario's law tests passed and ``may_be_better`` (no other test
    found it above the optimum); a rule whose law tests failed buys its acceptance with a loss."""
    s = ctx.scenario
    alpha = ctx.spend("efficiency")
    n = max(ctx.samples, 1)
    margin = span * np.sqrt(np.log(2.0 / alpha) / (2.0 * n))  # on the mean of n rows
    passed = measured > reference - margin  # accepting more than the reference rule is no inefficiency
    evidence = {**evidence, "margin": float(margin)}
    ctx.recorder.record(TestRecord(s.name, "efficiency", method, bool(passed), alpha, int(ctx.samples),
                                   statistic=float(measured - reference), details=dict(evidence)))
    if measured <= reference - margin:
        ctx.recorder.inefficiency("efficiency", below, evidence)
    elif measured >= reference + margin and may_be_better:
        if law_failed(ctx):
            ctx.recorder.information("efficiency", f"{above}; its output law failed the law tests, so it buys "
                                     "acceptance with a loss: not a better rule", evidence)
        else:
            ctx.recorder.information("efficiency", f"{above}: {better}", evidence)
