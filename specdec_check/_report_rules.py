"""What a report means: its layout version, the verdicts, the kinds of finding, the exit statuses (one table).

The rule every report obeys: ``passed`` is true exactly when no finding is of kind
``"failure"`` and the verdict is ``"passed"`` or ``"inefficient"`` (lossless, but it accepts
less than the standard rule). ``"inconclusive"`` (the law tests could not reach the mode's
design resolution) and ``"interrupted"`` (a partial report written after SIGINT, SIGTERM or
a time limit) never pass. ``"warning"`` findings (robustness policies: NaN inputs,
degenerate shapes) and ``"nonstandard"`` findings (a lossless rule other than the standard
one, under ``rule="any"``) are information: they never fail a report unless ``strict`` turns
warnings into failures.
"""

from __future__ import annotations

__all__ = ["FINDING_KINDS", "PASSING_VERDICTS", "REPORT_VERSION", "VERDICTS", "VERDICT_EXIT_STATUS", "verdict_of"]

#: Version of the report layout (``CheckReport.to_dict``); bump on incompatible changes.
REPORT_VERSION = 1

#: Every verdict a report may carry.
VERDICTS = ("passed", "inefficient", "failed", "inconclusive", "interrupted")

#: The verdicts under which ``passed`` may be true.
PASSING_VERDICTS = ("passed", "inefficient")

#: Every kind of finding: only ``"failure"`` fails a report.
FINDING_KINDS = ("failure", "inefficiency", "warning", "nonstandard")

#: Exit status of a run (and of ``specdec-check report``) for each verdict: 0 passed or
#: inefficient, 1 failed, 4 inconclusive (not enough evidence to say), and 1 for an
#: interrupted run (its partial report proves nothing; 1 is the status of "not passed"
#: that every CI treats as a failure).
VERDICT_EXIT_STATUS = {"passed": 0, "inefficient": 0, "failed": 1, "inconclusive": 4, "interrupted": 1}


def verdict_of(finding_kinds, *, inconclusive: bool) -> str:
    """The verdict of a complete run: failed over inconclusive over inefficient over passed."""
    kinds = set(finding_kinds)
    if "failure" in kinds:
        return "failed"
    if inconclusive:
        return "inconclusive"
    if "inefficiency" in kinds:
        return "inefficient"
    return "passed"
