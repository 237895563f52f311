"""Sampler kinds as data: what a kind is called with, on what scenarios, by which checks.

A :class:`SamplerKind` (verifier, generator; later tree and ragged verifiers) carries its call
keywords, its scenario type, its default battery and the checks that may be selected with
``checks=``; ``plan`` lists the statistical tests a scenario will run (each spends one share of
the run's false-alarm budget) and ``run_scenario`` runs one scenario. ``check_verifier`` and
``check_generator`` are thin wrappers over :func:`specdec_check.checker._session.run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["PlannedTest", "SamplerKind"]


@dataclass(frozen=True)
class PlannedTest:
    """A statistical test a check will run on one scenario: ``name`` identifies it within the
    scenario (and labels its alpha share), ``check`` is the selectable check that owns it."""

    name: str
    check: str


@dataclass(frozen=True)
class SamplerKind:
    """One kind of sampler the checker knows.

    ``plan(scenario, options)`` returns the scenario's :class:`PlannedTest` s under the options
    (selected check names, rule); ``run_scenario(run, sampler)`` runs the scenario, filling ``run``
    (a :class:`~specdec_check.checker._scenario_run.ScenarioRun`).
    """

    name: str
    command: str
    keywords: tuple
    scenario_type: type
    default_battery: Callable[[], list]
    checks: tuple
    plan: Callable
    run_scenario: Callable
    #: ``prepare(scenarios or None, selection) -> (scenarios, screen)``: the scenarios to run (the default
    #: battery for None) and whether the structural screen runs first ("ran", "not selected", ...).
    prepare: Callable
    #: ``diagnose(run, sampler)``: after the first scenario with a failure, say more about it (the
    #: verifier kind runs the rule-agnostic test there); None for kinds without one.
    diagnose: Callable | None = None
    #: ``{rule: the checks selected by default}`` for kinds judged under a rule; None: every check.
    rule_checks: dict | None = None
    #: Shards finer than a scenario (None: a scenario is one shard). ``parts(run) -> int``: how many block
    #: ranges the scenario's law loop is split into, from its plan alone (``run`` has no stream yet);
    #: ``run_scenario`` runs the range ``run.part`` and leaves ``run.evidence``; ``merge_part(run, later)``
    #: merges the next range's into the first's, ``concluded(run)`` says no later range is needed (the
    #: scenario stopped or rejected), ``conclude(run)`` records the merged tests and summarises.
    parts: Callable | None = None
    merge_part: Callable | None = None
    concluded: Callable | None = None
    conclude: Callable | None = None

    def parts_of(self, run) -> int:
        """How many shards ``run``'s scenario runs in (1 for kinds without finer shards)."""
        return 1 if self.parts is None else int(self.parts(run))

    def allowed_checks(self, rule: str = "standard") -> tuple:
        """The checks a run may select under ``rule``: all under "standard"; the rule-agnostic ones otherwise."""
        return tuple(self.checks) if rule == "standard" or not self.rule_checks else tuple(self.rule_checks[rule])

    def default_checks(self, rule: str = "standard") -> tuple:
        """The checks a run selects when ``checks=`` is not given."""
        return tuple(self.rule_checks[rule]) if self.rule_checks else tuple(self.checks)
