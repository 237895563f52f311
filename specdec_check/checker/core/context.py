"""A plan in, an outcome out: what one scenario's run is given, what it shares while running, what it returns.

- :class:`ScenarioPlan` (frozen, picklable): the scenario, its planned tests, the options, its share
  of the run's false-alarm budget, its random stream, its repro line, and which shard it is.
- :class:`ScenarioContext`: the run of one plan. Its parts have one owner each: the stream
  (``rng``: every input draw and every seed handed to the sampler, in a fixed order), the alpha
  ledger (``spend``), the :class:`~specdec_check.checker.core.recorder.Recorder` (the only way
  findings enter), and the usage counters (calls, rows handed to the sampler).
- :class:`ScenarioOutcome` (picklable): findings, records, summary, usage, the ledger labels spent,
  the stream's state, and for a shard of a split scenario the evidence the driver merges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .recorder import Recorder

__all__ = ["ScenarioContext", "ScenarioOutcome", "ScenarioPlan", "SeedBatch"]


@dataclass(frozen=True)
class ScenarioPlan:
    """Everything one scenario's run needs, decided before anything runs.

    ``tests`` are the :class:`~specdec_check.checker.core.kind.PlannedTest` s (each spends one
    share ``alpha / planned`` of the run's budget); ``seed`` the scenario's ``SeedSequence``; ``part``
    of ``parts`` the block range of a law loop split into shards (0 of 1: the scenario whole).
    """

    scenario: object
    tests: tuple
    options: object
    alpha: float
    planned: int
    seed: object
    repro: str
    part: int = 0
    parts: int = 1
    #: The driver's sample-size plans (:func:`~specdec_check.checker.core.planning.known_plans`), so that a worker
    #: running this scenario's shards does not compute them again.
    sample_plans: tuple = ()

    @property
    def names(self) -> frozenset:
        return frozenset(test.name for test in self.tests)


class ScenarioContext:
    """The run of one :class:`ScenarioPlan` by ``kind`` (see the module docstring).

    ``ledger`` is the run's :class:`~specdec_check.stats.AlphaLedger` in one process, a fresh one of the
    same total and plan on a worker (each test gets the very share it gets in one process).
    """

    def __init__(self, kind, plan: ScenarioPlan, ledger, rng: np.random.Generator | None):
        self.kind, self.plan, self.ledger, self.rng = kind, plan, ledger, rng
        options = plan.options
        self.scenario, self.options = plan.scenario, options
        self.mode, self.backend, self.selection = options.mode, options.backend, options.checks
        self.planned = plan.names
        self.recorder = Recorder(plan.scenario.name, plan.repro, strict=options.strict)
        self.calls = 0
        self.samples = 0  # rows handed to the sampler in the law loop (the report's sample counts)
        self.part, self.parts = plan.part, plan.parts
        self.summary = None
        self.evidence = None  # a split scenario's shard: what the driver merges (:mod:`.parts`)

    @property
    def stopped(self) -> bool:
        return self.recorder.stopped

    def selected(self, check: str) -> bool:
        """Whether the check named ``check`` was selected (``checks=``)."""
        return check in self.selection

    def spend(self, label: str) -> float:
        """One test's share of the run's false-alarm budget (the ledger refuses to overspend)."""
        return self.ledger.spend(f"{self.scenario.name}/{label}")

    def next_seed(self) -> int:
        """A seed for the sampler's next generator, from the scenario's stream."""
        return int(self.rng.integers(0, 2**63 - 1))

    def seed_batch(self, count: int) -> "SeedBatch":
        """The seeds of the next ``count`` calls at once, their generators made together (:class:`SeedBatch`)."""
        return SeedBatch(self, count)

    def sampler_call(self, sampler, /, **kwargs):
        """``sampler(**kwargs)``, the run's monitor told when the call starts and when it returns or raises an
        Exception (a BaseException ends the run: no "finished", so a supervisor knows the call)."""
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

    def outcome(self, evidence=None, worker: str = "") -> "ScenarioOutcome":
        """What this run produced (findings, records, summary, usage, spending, stream state)."""
        r = self.recorder
        return ScenarioOutcome(list(r.findings), list(r.records), self.summary, int(self.samples), int(self.calls),
                               bool(r.stopped), [label for label, _ in self.ledger.entries],
                               None if self.rng is None else self.rng.bit_generator.state, self.part, evidence, worker)

    def adopt(self, outcome: "ScenarioOutcome") -> None:
        """Continue from ``outcome`` (a finished run of this plan: its findings, records, usage, stream)."""
        r = self.recorder
        r.findings, r.records, r.stopped = list(outcome.findings), list(outcome.records), outcome.stopped
        self.samples, self.calls, self.summary = outcome.samples, outcome.calls, outcome.summary
        if outcome.rng_state is not None and self.rng is not None:
            self.rng.bit_generator.state = outcome.rng_state


class SeedBatch:
    """The seeds of the next ``count`` sampler calls: ``next()`` hands them out in order, each the very seed
    :meth:`ScenarioContext.next_seed` would have given at that call.

    Where the backend makes the generators of ``count`` calls together
    (:meth:`~specdec_check.checker.backends.base.Backend.prepares_generators`: numpy, from 16 calls; a sixth of the
    cost of one at a time, issue 31) the seeds are drawn in one draw (a draw of ``count`` 64-bit integers below
    2**63 takes the stream's words one by one, as ``count`` draws do) and handed to it; otherwise each is drawn
    when it is asked for. Used as a context manager around the calls, and nothing else that draws from the
    stream: on leaving, seeds drawn but not handed out go back to the stream (it is left where ``next_seed`` per
    call would have left it, so a block cut short by a finding ends in the same state) and unused generators are
    dropped.
    """

    __slots__ = ("_ctx", "_state", "_seeds", "taken")

    def __init__(self, ctx: ScenarioContext, count: int):
        self._ctx, self.taken = ctx, 0
        if ctx.backend.prepares_generators(count):
            self._state = ctx.rng.bit_generator.state
            self._seeds = [int(s) for s in ctx.rng.integers(0, 2**63 - 1, size=count)]
            ctx.backend.prepare_generators(self._seeds)
        else:
            self._state = self._seeds = None

    def next(self) -> int:
        """The next call's seed."""
        if self._seeds is None:
            self.taken += 1
            return self._ctx.next_seed()
        seed = self._seeds[self.taken]
        self.taken += 1
        return seed

    def __enter__(self) -> "SeedBatch":
        return self

    def __exit__(self, *exc) -> None:
        if self._seeds is None:
            return
        ctx = self._ctx
        ctx.backend.discard_generators(self._seeds)
        if self.taken < len(self._seeds):  # calls never made: their seeds are the stream's next ones again
            ctx.rng.bit_generator.state = self._state
            ctx.rng.integers(0, 2**63 - 1, size=self.taken)


@dataclass
class ScenarioOutcome:
    """What one scenario (or one shard of it) produced; picklable, so a worker sends it back as it is."""

    findings: list
    records: list
    summary: object
    samples: int
    calls: int
    stopped: bool
    spent: list
    rng_state: dict | None
    part: int = 0
    evidence: object = None
    worker: str = ""
    index: int = field(default=0)
