"""The state of one scenario's run, handed to the caller and the checks (no behaviour of its own)."""

from __future__ import annotations

import numpy as np

from ._report import Finding, TestRecord

__all__ = ["ScenarioRun"]


class ScenarioRun:
    """What one scenario's run shares: its inputs (scenario, plan, options, ledger, random stream)
    and what it produced (findings, test records, samples and calls counted, whether it stopped
    early, its summary).

    ``rng`` is the scenario's own stream (spawned from the run's seed); every draw of inputs and
    every seed handed to the sampler comes from it in a fixed order, so a seed replays a run.
    """

    def __init__(self, scenario, plan, options, ledger, rng: np.random.Generator, repro: str):
        self.scenario, self.plan, self.options = scenario, plan, options
        self.mode, self.backend, self.selection = options.mode, options.backend, options.checks
        self.ledger, self.rng, self.repro = ledger, rng, repro
        self.planned = {test.name for test in plan}
        self.findings: list = []
        self.records: list = []
        self.samples = 0
        self.calls = 0
        self.stopped = False  # a contract failure or an impossible event ends the scenario
        self.summary = None
        # A scenario whose law loop is split into block ranges (shards): this run's range, of how many, and
        # what it hands the driver to merge (:mod:`specdec_check.checker._shards`); part 0 also runs every
        # check that is not merged. One part: the scenario runs whole, as it always did.
        self.part, self.parts = 0, 1
        self.evidence = None

    def sampler_call(self, sampler, /, **kwargs):
        """``sampler(**kwargs)``, with the run's monitor told when the call starts and when it returns or
        raises an Exception (a BaseException ends the run: no "finished", so a supervisor knows the call)."""
        monitor = self.options.monitor
        if monitor is None:
            return sampler(**kwargs)
        monitor.call_started(self.scenario.name, self.calls)
        try:
            out = sampler(**kwargs)
        except Exception:
            monitor.call_finished(self.scenario.name, self.calls)
            raise
        monitor.call_finished(self.scenario.name, self.calls)
        return out

    def selected(self, check: str) -> bool:
        """Whether the check named ``check`` was selected (``checks=``)."""
        return check in self.selection

    def spend(self, label: str) -> float:
        """One test's share of the run's false-alarm budget (the ledger refuses to overspend)."""
        return self.ledger.spend(f"{self.scenario.name}/{label}")

    def next_seed(self) -> int:
        """A seed for the sampler's next generator, from the scenario's stream."""
        return int(self.rng.integers(0, 2**63 - 1))

    def fail(self, check: str, message: str, evidence=None, kind: str = "failure") -> None:
        self.findings.append(Finding(kind, check, self.scenario.name, message, dict(evidence or {}), self.repro))

    def warn(self, check: str, message: str, evidence=None) -> None:
        """A robustness finding (NaN inputs, degenerate shapes): a warning, or a failure under ``strict``."""
        self.fail(check, message, evidence, kind="failure" if self.options.strict else "warning")

    def record(self, record: TestRecord) -> None:
        self.records.append(record)

    def note_skipped(self, check: str, why: str) -> None:
        """A record saying a planned test did not run, and why."""
        self.records.append(TestRecord(self.scenario.name, check, "skipped", True, 0.0, 0, details={"skipped": why}))
