"""Mutation score: run the checker on every catalogued bug and control.

Reproduce the table with::

    python -c "from specdec_check.bugs import mutation_score, format_mutation_table; print(format_mutation_table(mutation_score()))"
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ._catalogue import catalogue

__all__ = ["MutationRow", "MutationScore", "format_mutation_table", "mutation_score", "score_entries"]


@dataclass(frozen=True)
class MutationRow:
    """The checker's verdict on one catalogue entry.

    outcome: "failure", "inefficiency", "warning" or "pass" (the worst finding kind), "inconclusive"
    (no finding but not enough evidence), or "error" when the check itself raised. detected: the
    checker flagged the entry (any finding, or an exception raised by the sampler). ok: the outcome
    is among the entry's ``ok_outcomes`` (:func:`specdec_check.bugs._entry.ok_outcomes`). rule: the rule the entry was judged under.
    """

    name: str
    kind: str
    source: str
    expected: str
    detected: bool
    outcome: str
    finding: str
    samples_used: int
    elapsed_s: float
    ok: bool
    rule: str = "standard"


@dataclass(frozen=True)
class MutationScore:
    """All rows plus the totals; ``exit_code`` is 1 when a bug went undetected or a control failed."""

    mode: str
    seed: int
    rows: tuple
    elapsed_s: float = 0.0
    reports: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def bugs(self) -> tuple:
        return tuple(r for r in self.rows if r.expected != "pass")

    @property
    def controls(self) -> tuple:
        return tuple(r for r in self.rows if r.expected == "pass")

    @property
    def detected(self) -> int:
        return sum(r.detected for r in self.bugs)

    @property
    def score(self) -> float:
        """Fraction of bugs detected (1.0 when there are none)."""
        return self.detected / len(self.bugs) if self.bugs else 1.0

    @property
    def samples_used(self) -> int:
        return sum(r.samples_used for r in self.rows)

    @property
    def exit_code(self) -> int:
        return 0 if all(r.ok for r in self.rows) else 1

    def __str__(self) -> str:
        return format_mutation_table(self)


def _describe(report) -> tuple:
    """``(outcome, finding)``: the worst finding kind of ``report`` (failure, inefficiency, warning), else
    "inconclusive" or "pass", and the checks and first message behind it."""
    for outcome, found in (("failure", report.failures), ("inefficiency", report.inefficiencies),
                           ("warning", report.warnings)):
        if found:
            break
    else:
        if report.verdict == "inconclusive":
            return "inconclusive", "; ".join(f"{name}: {reason}" for name, reason in report.inconclusive)[:200]
        return "pass", ""
    checks = sorted({f.check for f in found})
    message = str(found[0].message).splitlines()[0] if found[0].message else ""
    if len(message) > 120:
        message = message[:117] + "..."
    return outcome, f"{', '.join(checks)}: {message}" if message else ", ".join(checks)


def score_entries(entries, mode: str = "default", *, seed: int = 0, names=None, progress=None,
                  what: str = "catalogue") -> "MutationScore":
    """The mutation score of ``entries`` (any catalogue: chain, generator, tree, ragged): each entry's own
    ``report(mode, seed)`` (its kind, scheme and rule), its outcome, and whether that is what it expects.

    names: entry names to restrict the run to (a ``KeyError`` names the unknown ones); progress: None or
    ``progress(index, total, name)`` called before each entry.
    """
    entries = tuple(entries)
    if names is not None:
        wanted = set(names)
        unknown = wanted - {e.name for e in entries}
        if unknown:
            raise KeyError(f"unknown {what} entries: {sorted(unknown)}.")
        entries = tuple(e for e in entries if e.name in wanted)
    rows, reports = [], {}
    start = time.perf_counter()
    for index, e in enumerate(entries):
        if progress is not None:
            progress(index, len(entries), e.name)
        t0 = time.perf_counter()
        try:
            report = e.report(mode, seed)
        except Exception as exc:  # noqa: BLE001 - a sampler that raises is a detected bug, and a failed control
            outcome, finding, samples = "error", f"raised {type(exc).__name__}: {exc}", 0
        else:
            reports[e.name] = report
            outcome, finding = _describe(report)
            samples = int(report.samples_used)
        rows.append(MutationRow(
            name=e.name, kind=e.label, source=e.source, expected=e.expected,
            detected=outcome not in ("pass", "inconclusive"), outcome=outcome, finding=finding,
            samples_used=samples, elapsed_s=time.perf_counter() - t0, ok=outcome in e.ok_outcomes,
            rule=e.judged_rule))
    return MutationScore(mode=mode, seed=seed, rows=tuple(rows), elapsed_s=time.perf_counter() - start,
                         reports=reports)


def mutation_score(mode: str = "default", *, seed: int = 0, names=None, progress=None) -> "MutationScore":
    """Run ``check_verifier`` / ``check_generator`` on every catalogued bug and control
    (:func:`score_entries` over :func:`~specdec_check.bugs.catalogue`)."""
    return score_entries(catalogue(), mode, seed=seed, names=names, progress=progress)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_mutation_table(score: MutationScore) -> str:
    """The mutation score as a Markdown table: entry, kind, source, expected, detected, finding, samples."""
    lines = [
        f"Mutation score ({score.mode} mode, seed {score.seed}): {score.detected}/{len(score.bugs)} bugs detected, "
        f"{sum(r.ok for r in score.controls)}/{len(score.controls)} controls passed, "
        f"{score.samples_used:,} samples, {score.elapsed_s:.1f} s.",
        "",
        "| entry | kind | rule | source | expected | detected | finding | samples | ok |",
        "|---|---|---|---|---|---|---|---:|---|",
    ]
    for r in score.rows:
        detected = "yes" if r.detected else "no"
        finding = f"{r.outcome}: {r.finding}" if r.finding else r.outcome
        lines.append(
            f"| {_cell(r.name)} | {r.kind} | {r.rule} | {_cell(r.source)} | {r.expected} | {detected} | {_cell(finding)} | "
            f"{r.samples_used:,} | {'ok' if r.ok else 'NOT OK'} |"
        )
    return "\n".join(lines)
