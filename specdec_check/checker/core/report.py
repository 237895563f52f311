"""What a check proved: findings, per-test records and the CheckReport."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..._escape import one_line
from ..._json import to_builtin
from ..._report_rules import FINDING_KINDS, PASSING_VERDICTS, REPORT_VERSION, verdict_of

__all__ = ["CheckReport", "Finding", "ScenarioSummary", "TestRecord", "REPORT_VERSION"]



@dataclass(frozen=True)
class Finding:
    """One thing the checker found: a failure, an inefficiency or a warning."""

    kind: str
    check: str
    scenario: str
    message: str
    evidence: dict = field(default_factory=dict)
    repro: str = ""

    def __post_init__(self):
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"Finding.kind must be one of {FINDING_KINDS}; got {self.kind!r}.")

    def to_dict(self) -> dict:
        return to_builtin(asdict(self))

    def line(self) -> str:
        """The finding in one line, as the summary, the CLI and the property suite print it (names and
        messages from the user's code shown escaped)."""
        return f"[{self.kind}] {one_line(self.scenario)} / {self.check}: {one_line(self.message)}"


@dataclass(frozen=True)
class TestRecord:
    """The outcome of one statistical or exact test on one scenario."""

    __test__ = False  # not a pytest test class

    scenario: str
    check: str
    method: str
    passed: bool
    alpha: float
    n: int
    statistic: float | None = None
    pvalue: float | None = None
    evalue: float | None = None
    bins: int | None = None
    min_detectable_tv: float | None = None
    tv_plugin: float | None = None
    tv_upper: float | None = None
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return to_builtin(asdict(self))


@dataclass(frozen=True)
class ScenarioSummary:
    """Measured against exact efficiency figures for one scenario."""

    name: str
    description: str
    vocab_size: int
    gamma: int
    rows_per_call: int
    calls: int
    samples: int
    acceptance_measured: float | None = None
    acceptance_expected: float | None = None
    tokens_per_step_measured: float | None = None
    tokens_per_step_expected: float | None = None
    target_calls_per_token: float | None = None
    elapsed_s: float = 0.0
    stopped_early: bool = False
    #: The smallest TV the scenario's law tests could detect with power 0.99, as achieved (the best of
    #: its law tests at the samples they got); None when no law test ran on the scenario.
    achieved_tv: float | None = None
    #: Accepted drafts per step: measured; the standard rule's and block verification's (the optimum
    #: among valid verifiers) exact expectations on the same drafted rows (verifier scenarios).
    accepted_per_step: float | None = None
    standard_accepted_per_step: float | None = None
    optimal_accepted_per_step: float | None = None

    def to_dict(self) -> dict:
        return to_builtin(asdict(self))


@dataclass(frozen=True)
class CheckReport:
    """The verdict of :func:`check_verifier` or :func:`check_generator` and what backs it."""

    kind: str
    sampler: str
    passed: bool
    findings: tuple
    results: tuple
    scenarios: tuple
    mode: str
    backend: str
    device: str | None
    dtype: str
    tolerance: float
    seed: int
    alpha: float
    alpha_per_check: float
    samples_used: int
    elapsed_s: float
    design_tv: float
    checks: tuple = ()
    #: Whether robustness warnings count as failures (``strict=True``).
    strict: bool = False
    #: ``((scenario, reason), ...)``: why the evidence does not reach the design resolution (empty: it does).
    inconclusive: tuple = ()
    #: The weakest scenario's achieved resolution (the largest ``achieved_tv``); None without law tests.
    achieved_tv: float | None = None
    #: Whether the structural screen ran first: "ran", "not selected" or "not a verifier check".
    screen: str = "not a verifier check"
    #: What a verifier was judged against: "standard" (Leviathan et al.'s rule) or "any" lossless rule.
    rule: str = "standard"
    #: The drafting scheme a tree verifier was checked under (None for the other kinds).
    drafting: str | None = None
    #: The process protocol's version for a sampler outside this process (exec:, lib:, record:, replay:; None else).
    protocol: int | None = None

    @property
    def failures(self) -> tuple:
        return tuple(f for f in self.findings if f.kind == "failure")

    @property
    def inefficiencies(self) -> tuple:
        return tuple(f for f in self.findings if f.kind == "inefficiency")

    @property
    def warnings(self) -> tuple:
        return tuple(f for f in self.findings if f.kind == "warning")

    @property
    def verdict(self) -> str:
        """``"failed"`` (a failure finding), ``"inconclusive"`` (the law tests did not reach the mode's
        design resolution), ``"inefficient"`` (lossless, accepts less than the standard rule) or
        ``"passed"``; see :mod:`specdec_check._report_rules`."""
        return verdict_of((f.kind for f in self.findings), inconclusive=bool(self.inconclusive))

    def __post_init__(self):
        if self.passed != (self.verdict in PASSING_VERDICTS):
            raise ValueError(f"passed={self.passed} contradicts the verdict {self.verdict!r}; passed is true exactly "
                             f"when the verdict is one of {PASSING_VERDICTS}.")

    def to_dict(self) -> dict:
        """The report as JSON-safe builtins (layout version :data:`REPORT_VERSION`)."""
        return {
            "report_version": REPORT_VERSION,
            "kind": self.kind,
            "sampler": self.sampler,
            "passed": self.passed,
            "verdict": self.verdict,
            "mode": self.mode,
            "backend": self.backend,
            "device": self.device,
            "dtype": self.dtype,
            "tolerance": self.tolerance,
            "seed": self.seed,
            "alpha": self.alpha,
            "alpha_per_check": self.alpha_per_check,
            "design_tv": self.design_tv,
            "achieved_tv": self.achieved_tv,
            "inconclusive": [{"scenario": name, "reason": reason} for name, reason in self.inconclusive],
            "strict": self.strict,
            "screen": self.screen,
            "rule": self.rule,
            **({"drafting": self.drafting} if self.drafting is not None else {}),
            **({"protocol": self.protocol} if self.protocol is not None else {}),
            "samples_used": self.samples_used,
            "elapsed_s": self.elapsed_s,
            "checks": list(self.checks),
            "findings": [f.to_dict() for f in self.findings],
            "scenarios": [s.to_dict() for s in self.scenarios],
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def summary(self) -> str:
        """A plain-text verdict for people: what was tested, what was found, how to reproduce.

        Names and messages come from the user's code: their control characters are shown escaped."""
        lines = [
            f"specdec-check {self.kind} report: {one_line(self.sampler)}",
            f"verdict: {self.verdict.upper()}  (mode={self.mode}, backend={self.backend}"
            + (f", device={one_line(self.device)}" if self.device else "")
            + f", dtype={self.dtype}, seed={self.seed}" + (", strict" if self.strict else "")
            + (f", rule={self.rule}" if self.rule != "standard" else "")
            + (f", drafting={self.drafting}" if self.drafting is not None else "")
            + (f", protocol {self.protocol}" if self.protocol is not None else "") + ")",
            f"false-alarm budget: {self.alpha:g} for the whole run ({self.alpha_per_check:.3g} per check); "
            f"design TV {self.design_tv:g}; {self.samples_used:,} samples in {self.elapsed_s:.1f} s",
        ]
        failed_tests = [r for r in self.results if not r.passed]
        lines.append(f"tests: {len(self.results)} run, {len(failed_tests)} rejected; scenarios: {len(self.scenarios)}; "
                     f"screen: {self.screen}")
        for f in self.findings:
            lines.append(f"  {f.line()}")
            if f.repro:
                lines.append(f"      repro: {one_line(f.repro)}")
        if self.achieved_tv is not None:
            weakest = max((s for s in self.scenarios if s.achieved_tv is not None), key=lambda s: s.achieved_tv)
            lines.append(f"  resolution: the weakest scenario's law tests could detect a TV of {self.achieved_tv:.3g} with "
                         f"power 0.99 (weakest: {one_line(weakest.name)}; design {self.design_tv:g})")
        for name, reason in self.inconclusive:
            lines.append(f"  [inconclusive] {one_line(name)}: {one_line(reason)}")
        if not self.findings and not self.inconclusive:
            lines.append("  no findings")
        return "\n".join(lines)
