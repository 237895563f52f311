"""What a report's verdict means, and the check that ``passed`` agrees with the findings.

The rule every report obeys: ``passed`` is true exactly when no finding is of kind
``"failure"`` and the verdict is ``"passed"`` or ``"inefficient"`` (lossless, but it accepts
less than the standard rule). ``"inconclusive"`` (the tests could not reach the stated
resolution) and ``"interrupted"`` (a partial report written after SIGINT, SIGTERM or a
time limit) never pass. ``"warning"`` and ``"nonstandard"`` findings are information: they
never make a report fail by themselves.
"""

from __future__ import annotations

__all__ = [
    "FINDING_KINDS",
    "PASSING_VERDICTS",
    "VERDICTS",
    "VERDICT_EXIT_STATUS",
    "check_verdict",
    "expected_passed",
]

from .._report_rules import FINDING_KINDS, PASSING_VERDICTS, VERDICT_EXIT_STATUS, VERDICTS


def expected_passed(verdict, findings) -> bool:
    """What ``passed`` must be for this verdict and these findings (the rule in the module docstring)."""
    failures = sum(1 for f in findings if isinstance(f, dict) and f.get("kind") == "failure")
    return verdict in PASSING_VERDICTS and failures == 0


def check_verdict(data: dict) -> None:
    """Raise :class:`ValueError` unless ``passed`` and ``verdict`` agree with the findings.

    A report whose ``passed`` says true beside a failure finding (or whose verdict says
    ``"passed"`` beside one) was edited by hand or written by a broken tool: it is not
    rendered and never exits 0.
    """
    verdict, passed, findings = data.get("verdict"), data.get("passed"), data.get("findings") or []
    failures = sum(1 for f in findings if isinstance(f, dict) and f.get("kind") == "failure")
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}; a report's verdict is one of {', '.join(VERDICTS)}")
    if not isinstance(passed, bool):
        raise ValueError(f'"passed" must be true or false; got {passed!r}')
    if verdict in PASSING_VERDICTS and failures:
        raise ValueError(f"inconsistent report: the verdict is {verdict!r} but {failures} finding(s) are failures "
                         "(was report.json edited by hand?)")
    want = expected_passed(verdict, findings)
    if passed != want:
        raise ValueError(f'inconsistent report: "passed" is {str(passed).lower()} but the verdict is {verdict!r} '
                         f"with {failures} failure finding(s), so it must be {str(want).lower()} "
                         "(was report.json edited by hand?)")
