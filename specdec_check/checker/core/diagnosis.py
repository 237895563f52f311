"""After a scenario fails under the standard rule: what does the output law itself say? (every kind judged
under a rule)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ... import stats
from ..._settings import RULES
from ..checks.completed import rule_agnostic_diagnosis
from .context import ScenarioContext
from .loop import run_scenario
from .parts import whole

__all__ = ["diagnose"]

#: The checks the rule-agnostic diagnosis runs: the completed-law tests, on outputs that keep the contract and
#: emit nothing of target probability zero.
DIAGNOSIS_CHECKS = ("contract", "impossible", "completed")
#: Failures another lossless rule would not explain: a broken contract (a raise, a write into the inputs),
#: and randomness (every lossless rule needs a reproducible generator and independent rows).
NOT_A_RULE_QUESTION = ("contract", "independence", "determinism")


def diagnose(kind, ctx, sampler, outcome) -> bool:
    """After the first failing scenario of a full standard-rule run (``ctx``, whose ``outcome`` was handed on):
    run the rule-agnostic test there (fresh calls on the scenario's continued stream, its own false-alarm budget
    equal to the run's, which the verdict does not use) and say in the first failure another rule could explain
    (not a randomness failure: :data:`NOT_A_RULE_QUESTION`) what the output law shows
    (a lossless rule other than the reference, or a loss). Updates ``outcome.findings``; returns whether it ran
    (once per run: a one-check run, as the suite makes, stays one check)."""
    options = ctx.options
    if (options.rule != RULES[0] or RULES[1] not in kind.rules or not kind.diagnosable(ctx.scenario)
            or "completed" in ctx.planned or set(kind.default_checks(RULES[0])) - set(options.checks)):
        return False
    findings = ctx.recorder.findings
    failures = [i for i, f in enumerate(findings) if f.kind == "failure"]
    if any(findings[i].check == "contract" for i in failures):
        return False  # a broken contract (a raise, a write into the inputs) says nothing about the rule
    first = next((i for i in failures if findings[i].check not in NOT_A_RULE_QUESTION), None)
    if first is None:
        return False
    sub_options = dataclasses.replace(options, rule=RULES[1], checks=DIAGNOSIS_CHECKS, mode=whole(options.mode))
    tests = tuple(kind.plan(ctx.scenario, sub_options))
    plan = dataclasses.replace(ctx.plan, tests=tests, options=sub_options, alpha=options.alpha,
                               planned=max(1, len(tests)), part=0, parts=1)
    sub = ScenarioContext(kind, plan, stats.AlphaLedger(options.alpha, planned=max(1, len(tests))),
                          np.random.default_rng(ctx.rng.integers(2**63)))
    run_scenario(kind, sub, sampler)
    ctx.calls += sub.calls
    text, evidence = rule_agnostic_diagnosis(sub.recorder.records, sub.recorder.findings, ctx.mode.design_tv)
    finding = findings[first]
    findings[first] = dataclasses.replace(finding, message=f"{finding.message} [{text}]",
                                          evidence={**finding.evidence, "rule_agnostic": evidence})
    outcome.findings = list(findings)
    return True
