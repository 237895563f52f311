"""One check from start to report: plan every test, spend one alpha budget, run each scenario."""

from __future__ import annotations

import dataclasses
import functools
import time
import zlib

import numpy as np

from .. import stats
from .._report_rules import PASSING_VERDICTS, verdict_of
from ._blas import one_blas_thread
from ._callables import check_sampler, qualified_name
from ._parts import part_seed
from ._report import CheckReport
from ._repro import repro_command
from ._scenario_run import ScenarioRun
from ._shards import resolves_to as _resolves_to
from ._shards import run_sharded

__all__ = ["achieved_resolution", "evidence_gaps", "planned_samples", "run"]


@functools.lru_cache(maxsize=256)  # a battery plans a few distinct (TV, support, alpha) triples
def planned_samples(design_tv: float, support_size: int, alpha: float) -> int:
    """:func:`specdec_check.stats.samples_for` for a uniform law, memoised: every scenario of a
    battery plans with the same arguments, and the plan is a pure function of them."""
    return int(stats.samples_for(design_tv, support_size=support_size, alpha=alpha))


def achieved_resolution(records) -> float | None:
    """The smallest TV a scenario's law tests could detect with power 0.99, as achieved: the best
    ``min_detectable_tv`` among its records (law tests only carry one); None without law tests."""
    values = [r.min_detectable_tv for r in records if r.min_detectable_tv is not None and r.n > 0]
    return min(values) if values else None


def evidence_gaps(summaries, design_tv: float) -> tuple:
    """``((scenario, reason), ...)`` for scenarios whose law tests did not reach ``design_tv``, or one
    entry for the whole run when no scenario ran a law test: without them nothing is proven exact."""
    gaps, any_law = [], False
    for s in summaries:
        if s.achieved_tv is None:
            continue
        any_law = True
        if s.achieved_tv > design_tv:
            gaps.append((s.name, f"its law tests could detect only a TV of {s.achieved_tv:.3g} with power 0.99 "
                                 f"({s.samples:,} samples over {s.calls:,} calls), short of the mode's design TV "
                                 f"{design_tv:g}: give it more rows per call, or run --mode thorough"))
    if not any_law:
        gaps.append(("(all)", "no law test ran (every law check deselected or every scenario stopped before one): "
                              "nothing about the output law was tested"))
    return tuple(gaps)


def _load_scenarios(path: str) -> list:
    from .._settings import resolve_callable

    found = resolve_callable(path, what="scenario list", require_callable=False)
    found = found() if callable(found) else found
    try:
        return list(found)
    except TypeError:
        raise TypeError(f"{path!r} is neither a scenario list nor a callable returning one.") from None


def scenario_seeds(seed: int, names) -> list:
    """One ``SeedSequence`` per scenario, keyed by the run's seed and the scenario's name (and how many
    earlier scenarios share that name), not by its position: ``--scenario NAME`` replays the very
    draws the scenario had in the whole battery."""
    seen: dict = {}
    streams = []
    for name in names:
        occurrence = seen.get(name, 0)
        seen[name] = occurrence + 1
        streams.append(np.random.SeedSequence([int(seed), zlib.crc32(name.encode("utf-8", "surrogatepass")),
                                               occurrence]))
    return streams


def _shard_label(name: str, part: int, parts: int) -> str:
    return name if parts == 1 else f"{name} [shard {part + 1}/{parts}]"


def _run_here(kind, sampler, scenarios, plans, options, ledger, seeds, repros, progress, parts):
    """Each scenario in this process, in order: ``(its ScenarioRun, its diagnosis)`` one at a time; a split
    scenario's shards run one after another and merge as they do on an executor, until one concludes it."""
    total, done = sum(parts), 0
    for i, (scenario, plan) in enumerate(zip(scenarios, plans)):
        if progress is not None:
            progress(done, total, _shard_label(scenario.name, 0, parts[i]))
        state = ScenarioRun(scenario, plan, options, ledger, np.random.default_rng(seeds[i]), repros[i])
        kind.run_scenario(state, sampler)
        if state.parts != parts[i]:
            raise RuntimeError(f"scenario {scenario.name!r} ran in {state.parts} shard(s) where its plan made "
                               f"{parts[i]}: the kind's parts() and run_scenario() disagree (a bug in specdec-check).")
        done += 1
        if state.parts > 1:
            for part in range(1, state.parts):
                if kind.concluded(state):
                    break
                if progress is not None:
                    progress(done, total, _shard_label(scenario.name, part, state.parts))
                later = ScenarioRun(scenario, plan, options, stats.AlphaLedger(ledger.total, planned=ledger.planned),
                                    np.random.default_rng(part_seed(seeds[i], part)), repros[i])
                later.part, later.parts = part, state.parts
                kind.run_scenario(later, sampler)
                kind.merge_part(state, later)
                done += 1
            done = sum(parts[: i + 1])
            kind.conclude(state)
        yield state, (functools.partial(kind.diagnose, state, sampler) if kind.diagnose is not None else None)


def run(kind, sampler, scenarios, options) -> CheckReport:
    """Check ``sampler`` of ``kind`` (a :class:`~specdec_check.checker._kinds.SamplerKind`) on
    ``scenarios`` (None: the kind's default battery) under validated ``options``.

    Every scenario's statistical tests are planned first, so one alpha ledger splits the run's
    budget over all of them (Bonferroni); each scenario then runs on its own random stream,
    spawned from the seed in scenario order. The verdict needs evidence: a run whose scenarios'
    law tests did not reach the mode's design resolution is inconclusive, never passed.

    With ``options.executor`` the scenarios run as shards on it (:mod:`._shards`) and are merged in
    battery order: the same report as in this process, timings aside.
    """
    check_sampler(sampler, kind.keywords, kind.name)
    if isinstance(scenarios, str):  # a MODULE:ATTR path of a scenario list (or of a callable returning one)
        source, scenarios = scenarios, _load_scenarios(scenarios)
    else:
        source = None if scenarios is None else False
    if options.scenarios_source is None:
        options = dataclasses.replace(options, scenarios_source=source)
    name = options.sampler_name or qualified_name(sampler)
    if options.sampler_name is None:
        options = dataclasses.replace(options, sampler_name=name if _resolves_to(name, sampler) else None)
    scenarios, screen = kind.prepare(scenarios, options.checks)
    for s in scenarios:
        if not isinstance(s, kind.scenario_type):
            raise TypeError(f"scenarios must be {kind.scenario_type.__name__} objects; got {type(s).__name__}.")
    plans = [kind.plan(s, options) for s in scenarios]
    ledger = stats.AlphaLedger(options.alpha, planned=max(1, sum(len(p) for p in plans)))
    backend, monitor = options.backend, options.monitor
    header = dict(kind=kind.name, sampler=name, mode=options.mode.name, backend=backend.name,
                  device=options.device_template or backend.device,
                  dtype=backend.dtype, tolerance=float(backend.tolerance), seed=options.seed, alpha=options.alpha,
                  alpha_per_check=ledger.per_check, design_tv=options.mode.design_tv, checks=tuple(options.checks),
                  strict=options.strict, screen=screen, rule=options.rule)
    if monitor is not None:
        monitor.run_started(dict(header, checks=list(header["checks"])), [s.name for s in scenarios])
    progress = options.progress
    started = time.perf_counter()
    findings, records, summaries, samples = [], [], [], 0
    seeds = scenario_seeds(options.seed, [s.name for s in scenarios])
    defaults = {id(s) for s in kind.default_battery()}  # those reproduce with --scenario NAME alone
    no_source = dataclasses.replace(options, scenarios_source=None)
    repros = [repro_command(kind, no_source if id(s) in defaults else options, s.name) for s in scenarios]
    diagnosed = kind.diagnose is None
    # How many shards each scenario's law loop runs in (fixed by the plan, whatever runs them).
    parts = [kind.parts_of(ScenarioRun(s, plan, options, ledger, None, repro))
             for s, plan, repro in zip(scenarios, plans, repros)]
    # The backend's settings for the run (torch on the CPU: one thread) and one BLAS thread, here and in
    # every shard, so the arithmetic (and the report) is the same whatever runs the scenarios.
    with one_blas_thread(), backend.running():
        if options.executor is None:
            finished = _run_here(kind, sampler, scenarios, plans, options, ledger, seeds, repros, progress, parts)
        else:  # the same scenarios as shards on the executor, handed back in battery order
            finished = run_sharded(kind, sampler, scenarios, plans, options, ledger, seeds, repros, progress, parts)
        for i, (state, diagnose) in enumerate(finished):
            if options.executor is not None:
                for label in state.spent:  # the worker's spending, in the run's ledger
                    ledger.spend(label)
            if not diagnosed and any(f.kind == "failure" for f in state.findings):
                diagnosed = diagnose()
            findings += state.findings
            records += state.records
            summaries.append(dataclasses.replace(state.summary, achieved_tv=achieved_resolution(state.records)))
            samples += state.samples
            if monitor is not None:
                monitor.scenario_finished(i, [f.to_dict() for f in state.findings], [r.to_dict() for r in state.records],
                                          summaries[-1].to_dict())
    if progress is not None:
        progress(sum(parts), sum(parts), "done")
    gaps = evidence_gaps(summaries, options.mode.design_tv)
    resolved = [s.achieved_tv for s in summaries if s.achieved_tv is not None]
    verdict = verdict_of((f.kind for f in findings), inconclusive=bool(gaps))
    return CheckReport(
        **header, passed=verdict in PASSING_VERDICTS, findings=tuple(findings), results=tuple(records),
        scenarios=tuple(summaries), samples_used=int(samples), elapsed_s=time.perf_counter() - started,
        inconclusive=gaps, achieved_tv=max(resolved) if resolved else None,
    )
