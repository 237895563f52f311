"""One check from start to report: plan every test, spend one alpha budget, run each scenario."""

from __future__ import annotations

import functools
import time

import numpy as np

from .. import stats
from ._callables import check_sampler, qualified_name
from ._report import CheckReport
from ._repro import repro_command
from ._scenario_run import ScenarioRun

__all__ = ["planned_samples", "run"]


@functools.lru_cache(maxsize=256)  # a battery plans a few distinct (TV, support, alpha) triples
def planned_samples(design_tv: float, support_size: int, alpha: float) -> int:
    """:func:`specdec_check.stats.samples_for` for a uniform law, memoised: every scenario of a
    battery plans with the same arguments, and the plan is a pure function of them."""
    return int(stats.samples_for(design_tv, support_size=support_size, alpha=alpha))


def _scenarios(kind, scenarios) -> list:
    scenarios = kind.default_battery() if scenarios is None else list(scenarios)
    for s in scenarios:
        if not isinstance(s, kind.scenario_type):
            raise TypeError(f"scenarios must be {kind.scenario_type.__name__} objects; got {type(s).__name__}.")
    return scenarios


def run(kind, sampler, scenarios, options) -> CheckReport:
    """Check ``sampler`` of ``kind`` (a :class:`~specdec_check.checker._kinds.SamplerKind`) on
    ``scenarios`` (None: the kind's default battery) under validated ``options``.

    Every scenario's statistical tests are planned first, so one alpha ledger splits the run's
    budget over all of them (Bonferroni); each scenario then runs on its own random stream,
    spawned from the seed in scenario order.
    """
    check_sampler(sampler, kind.keywords, kind.name)
    scenarios = _scenarios(kind, scenarios)
    plans = [kind.plan(s, options.checks) for s in scenarios]
    ledger = stats.AlphaLedger(options.alpha, planned=max(1, sum(len(p) for p in plans)))
    name = qualified_name(sampler)
    progress = options.progress
    started = time.perf_counter()
    findings, records, summaries, samples = [], [], [], 0
    seeds = np.random.SeedSequence(options.seed).spawn(len(scenarios))
    for i, (scenario, plan) in enumerate(zip(scenarios, plans)):
        if progress is not None:
            progress(i, len(scenarios), scenario.name)
        state = ScenarioRun(scenario, plan, options, ledger, np.random.default_rng(seeds[i]),
                            repro_command(kind.command, name, options, scenario.name))
        kind.run_scenario(state, sampler)
        findings += state.findings
        records += state.records
        summaries.append(state.summary)
        samples += state.samples
    if progress is not None:
        progress(len(scenarios), len(scenarios), "done")
    backend = options.backend
    return CheckReport(
        kind=kind.name, sampler=name, passed=not any(f.kind == "failure" for f in findings),
        findings=tuple(findings), results=tuple(records), scenarios=tuple(summaries), mode=options.mode.name,
        backend=backend.name, device=backend.device, dtype=backend.dtype, tolerance=float(backend.tolerance),
        seed=options.seed, alpha=options.alpha, alpha_per_check=ledger.per_check, samples_used=int(samples),
        elapsed_s=time.perf_counter() - started, design_tv=options.mode.design_tv, checks=tuple(options.checks),
    )
