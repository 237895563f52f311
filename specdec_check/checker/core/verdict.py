"""From test records to findings, for every kind: what a scenario's rejected tests mean, and when a run's
evidence falls short of its mode's design resolution.

The rules (one place): a rejected output-law test is a failure. A rejected acceptance test is a
failure too, unless every output-law test passed and the sampler accepts less than the reference
rule: then it is lossless but inefficient. Fully accepted steps without a bonus token are an
inefficiency. A kind says how its findings read through a :class:`Wording`.
"""

from __future__ import annotations

from .tally import law_evidence

__all__ = ["CONSEQUENCE_OF_DEPENDENCE", "Wording", "by_cause", "classify", "evidence_gaps", "law_statistics"]

#: What a law failure adds when the run also found dependent rows: the law tests assume independent
#: samples, so coupled rows can fail them even where each row's own law is exact.
CONSEQUENCE_OF_DEPENDENCE = (" (this may be a consequence of the independence failure listed first: the law tests "
                             "assume independent rows, and coupled rows can fail them even where each row's own "
                             "law is exact)")


def law_statistics(record, *, of: str = "samples") -> str:
    """``"(method): p = ..., e-value ..., plug-in TV ... over n samples"``: how a rejected law test rejected."""
    return (f"({record.method}): p = {record.pvalue:.3g}"
            + (f", e-value {record.evalue:.3g}" if record.evalue is not None else "")
            + f", plug-in TV {record.tv_plugin:.3g} over {record.n:,} {of}")


class Wording:
    """How one kind's findings from rejected tests read; subclasses override what differs."""

    #: Law checks whose failure means the output law is wrong (not merely inefficient).
    output_law_checks: tuple = ()
    #: Checks of how often drafts are accepted: alone, their failure means lossless but inefficient.
    acceptance_checks: tuple = ("accepted_count", "efficiency")

    def law_failure(self, ctx, record) -> tuple:
        """``(message, evidence)`` of a rejected output-law test."""
        return (f"the output law differs from the exact law {law_statistics(record)}" + law_evidence(record),
                {"pvalue": record.pvalue, "evalue": record.evalue, "n": record.n,
                 "worst_cells": record.details.get("worst_cells", []),
                 "worst_tokens": record.details.get("worst_tokens", []), "tv_plugin": record.tv_plugin})

    def acceptance(self, ctx, counts) -> tuple:
        """``(measured, reference, text, evidence)``: accepted drafts per step, the reference rule's, and what the
        acceptance findings add (a request to name)."""
        n = max(ctx.samples, 1)
        return counts.accepted_total / n, counts.accepted_expected / n, "", {}

    def inefficient(self, ctx, measured: float, reference: float) -> str:
        raise NotImplementedError

    def acceptance_failure(self, measured: float, reference: float, record) -> str:
        raise NotImplementedError

    def bonus_missing(self, missing: int) -> tuple | None:
        """``(message, evidence)`` for fully accepted steps without a bonus token (None: the kind has none)."""
        return None


def classify(ctx, counts, wording: Wording) -> None:
    """Turn a scenario's rejected tests into findings (see the module docstring)."""
    recorder = ctx.recorder
    acceptance = wording.acceptance_checks if ctx.options.rule == "standard" else ()  # "any": judged by the check
    laws = wording.output_law_checks
    records = [r for r in recorder.records if r.check in laws + acceptance]
    law_bad = [r for r in records if r.check in laws and not r.passed]
    acceptance_bad = [r for r in records if r.check in acceptance and not r.passed]
    for r in law_bad:
        recorder.failure(r.check, *wording.law_failure(ctx, r))
    if acceptance_bad:
        measured, reference, text, evidence = wording.acceptance(ctx, counts)
        if not law_bad and measured < reference:
            recorder.inefficiency("efficiency", wording.inefficient(ctx, measured, reference) + text,
                                  {"accepted_per_step": measured, "optimal": reference,
                                   "pvalues": [r.pvalue for r in acceptance_bad], **evidence})
        else:
            for r in acceptance_bad:
                recorder.failure(r.check, wording.acceptance_failure(measured, reference, r) + text,
                                 {"accepted_per_step": measured, "optimal": reference, "pvalue": r.pvalue, **evidence})
    bonus = wording.bonus_missing(counts.bonus_missing) if getattr(counts, "bonus_missing", 0) else None
    if bonus is not None:
        recorder.inefficiency("efficiency", *bonus)


def by_cause(findings, law_checks) -> list:
    """The run's findings ordered by cause: when rows were found dependent by a test that separates
    dependence from a wrong row law (an ``independence`` failure whose evidence carries
    :data:`~specdec_check.checker.checks.randomness.DEPENDENCE`), those failures come first and the
    failures of ``law_checks`` (and the acceptance checks) say that they may be its consequence
    (:data:`CONSEQUENCE_OF_DEPENDENCE`); otherwise the order is unchanged."""
    import dataclasses

    from ..checks.randomness import DEPENDENCE

    def is_dependence(f):
        return f.kind == "failure" and f.check == "independence" and f.evidence.get(DEPENDENCE)

    dependent = [f for f in findings if is_dependence(f)]
    if not dependent:
        return list(findings)
    consequences = set(law_checks) | set(Wording.acceptance_checks)
    rest = [dataclasses.replace(f, message=f.message + CONSEQUENCE_OF_DEPENDENCE)
            if f.kind == "failure" and f.check in consequences else f
            for f in findings if not is_dependence(f)]
    return dependent + rest


def _advice(name: str, *, own: frozenset, failed: frozenset, mode: str) -> str:
    """What this user can do about a scenario short of the design TV (nothing to do where it failed)."""
    if name in failed:
        return "it stopped at its failure (listed above), which is the finding; more samples would not change it"
    more = "run --mode thorough" if mode != "thorough" else "set a coarser --tv"
    return f"give it more rows per call, or {more}" if name in own else more


def evidence_gaps(summaries, design_tv: float, *, own=(), failed=(), mode: str = "default") -> tuple:
    """``((scenario, reason), ...)`` for scenarios whose law tests did not reach ``design_tv``, or one
    entry for the whole run when no scenario ran a law test: without them nothing is proven exact.

    The advice names only what the user can do: more rows per call only for the scenarios they wrote
    (``own``, by name), none for a scenario that stopped at a failure (``failed``)."""
    own, failed = frozenset(own), frozenset(failed)
    gaps, any_law = [], False
    for s in summaries:
        if s.achieved_tv is None:
            continue
        any_law = True
        if s.achieved_tv > design_tv:
            gaps.append((s.name, f"its law tests could detect only a TV of {s.achieved_tv:.3g} with power 0.99 "
                                 f"({s.samples:,} samples over {s.calls:,} calls), short of the mode's design TV "
                                 f"{design_tv:g}: {_advice(s.name, own=own, failed=failed, mode=mode)}"))
    if not any_law:
        gaps.append(("(all)", "no law test ran (every law check deselected or every scenario stopped before one): "
                              "nothing about the output law was tested"))
    return tuple(gaps)
