"""The recorder: the one way findings and test records enter a scenario's outcome."""

from __future__ import annotations

from .policy import finding_kind
from .report import Finding, TestRecord

__all__ = ["Recorder"]


class Recorder:
    """Findings and test records of one scenario, in the order they were made.

    Checks report a *case* (:mod:`~specdec_check.checker.core.policy`), never a finding kind: the
    policy table and ``strict`` decide the kind. ``stop()`` ends the scenario's calls (a contract
    failure, an event of probability zero); nothing else does.
    """

    def __init__(self, scenario: str, repro: str, *, strict: bool):
        self.scenario, self.repro, self.strict = scenario, repro, bool(strict)
        self.findings: list = []
        self.records: list = []
        self.stopped = False

    # -- findings ------------------------------------------------------------------------------------
    def report(self, case: str, check: str, message: str, evidence=None) -> Finding:
        """A finding of ``case`` about ``check`` (its kind from the policy table)."""
        finding = Finding(finding_kind(case, strict=self.strict), check, self.scenario, message,
                          dict(evidence or {}), self.repro)
        self.findings.append(finding)
        return finding

    def failure(self, check: str, message: str, evidence=None, *, stop: bool = False) -> Finding:
        finding = self.report("failure", check, message, evidence)
        if stop:
            self.stop()
        return finding

    def robustness(self, check: str, message: str, evidence=None) -> Finding:
        """A robustness finding (NaN inputs, degenerate shapes): a warning, a failure under ``strict``."""
        return self.report("robustness", check, message, evidence)

    def edge_case(self, check: str, message: str, evidence=None) -> Finding:
        """An edge case of stated tiny rate (a coin of exactly 0): a warning, a failure under ``strict``."""
        return self.report("edge_case", check, message, evidence)

    def inefficiency(self, check: str, message: str, evidence=None) -> Finding:
        return self.report("inefficiency", check, message, evidence)

    def information(self, check: str, message: str, evidence=None) -> Finding:
        """Information (a ``"nonstandard"`` finding): another lossless rule, or one that accepts more."""
        return self.report("information", check, message, evidence)

    def stop(self) -> None:
        """End the scenario's calls (the checks still finish on what they saw)."""
        self.stopped = True

    # -- questions -----------------------------------------------------------------------------------
    def failed(self) -> bool:
        return any(f.kind == "failure" for f in self.findings)

    def has(self, kind: str, *, check: str | None = None, event: str | None = None) -> bool:
        """Whether a finding of ``kind`` (about ``check``, with evidence ``event``) was made already."""
        return any(f.kind == kind and (check is None or f.check == check)
                   and (event is None or f.evidence.get("event") == event) for f in self.findings)

    # -- records -------------------------------------------------------------------------------------
    def record(self, record: TestRecord) -> None:
        self.records.append(record)

    def skipped(self, check: str, why: str) -> None:
        """A record saying a planned test did not run, and why."""
        self.records.append(TestRecord(self.scenario, check, "skipped", True, 0.0, 0, details={"skipped": why}))

    def mark(self) -> tuple:
        """Where the findings and records end now (:meth:`since` takes what came after)."""
        return len(self.findings), len(self.records)

    def since(self, mark: tuple) -> tuple:
        """``(findings, records)`` made after ``mark``, removed from the recorder (a split scenario's first
        shard hands them to the conclusion, which puts them where a whole run would)."""
        f, r = mark
        taken = (self.findings[f:], self.records[r:])
        del self.findings[f:], self.records[r:]
        return taken
