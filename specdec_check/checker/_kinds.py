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

    def allowed_checks(self, rule: str = "standard") -> tuple:
        """The checks a run may select under ``rule``: all under "standard"; the rule-agnostic ones otherwise."""
        return tuple(self.checks) if rule == "standard" or not self.rule_checks else tuple(self.rule_checks[rule])

    def default_checks(self, rule: str = "standard") -> tuple:
        """The checks a run selects when ``checks=`` is not given."""
        return tuple(self.rule_checks[rule]) if self.rule_checks else tuple(self.checks)
