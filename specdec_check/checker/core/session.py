"""One check from start to report: plan every test, spend one alpha budget, run each scenario, report."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import zlib

import numpy as np

from ... import stats
from ..._report_rules import PASSING_VERDICTS, verdict_of
from ..backends.blas import one_blas_thread
from .callables import check_sampler, qualified_name
from .context import ScenarioContext, ScenarioPlan
from .diagnosis import diagnose
from .executors import ShardRunner
from .loop import conclude, run_scenario
from .parts import concluded, merge_part, part_seed, parts_of
from .planning import achieved_resolution, known_plans, remember_plans
from .report import CheckReport
from .repro import repro_command
from .shards import resolves_to, run_sharded, shard_label
from .verdict import by_cause, evidence_gaps

__all__ = ["run", "scenario_seeds"]


def _load_scenarios(path: str) -> list:
    from ..._settings import resolve_callable

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


def _run_here(kind, sampler, plans, ledger, progress):
    """Each scenario in this process, in order: ``(its context, its diagnosis)`` one at a time; a split scenario's
    shards run one after another and merge as they do on an executor, until one concludes it."""
    total, done = sum(p.parts for p in plans), 0
    for plan in plans:
        name = plan.scenario.name
        if progress is not None:
            progress(done, total, shard_label(name, 0, plan.parts))
        ctx = ScenarioContext(kind, plan, ledger, np.random.default_rng(plan.seed))
        run_scenario(kind, ctx, sampler)
        if ctx.parts != plan.parts:
            raise RuntimeError(f"scenario {name!r} ran in {ctx.parts} shard(s) where its plan made {plan.parts}: "
                               "the kind's law_plan() and its law loop disagree (a bug in specdec-check).")
        done += 1
        if plan.parts > 1:
            for part in range(1, plan.parts):
                if concluded(ctx):
                    break
                if progress is not None:
                    progress(done, total, shard_label(name, part, plan.parts))
                later_plan = dataclasses.replace(plan, seed=part_seed(plan.seed, part), part=part)
                later = ScenarioContext(kind, later_plan, stats.AlphaLedger(ledger.total, planned=ledger.planned),
                                        np.random.default_rng(later_plan.seed))
                run_scenario(kind, later, sampler)
                merge_part(ctx, later.outcome(later.evidence))
                done += 1
            done = sum(p.parts for p in plans[:plans.index(plan) + 1])
            conclude(kind, ctx)
        yield ctx.outcome(), functools.partial(diagnose, kind, ctx, sampler)


def _plans(kind, scenarios, options, ledger, runner=None) -> list:
    """Every scenario's :class:`ScenarioPlan`: its tests, its stream, its repro line, its shards (planned side by
    side on ``runner``'s executor where there is one: :func:`~.shards.planned_on`)."""
    seeds = scenario_seeds(options.seed, [s.name for s in scenarios])
    defaults = {id(s) for s in kind.default_battery()}  # those reproduce with --scenario NAME alone
    no_source = dataclasses.replace(options, scenarios_source=None)
    plans = []
    for scenario, seed in zip(scenarios, seeds):
        repro = repro_command(kind, no_source if id(scenario) in defaults else options, scenario.name)
        plans.append(ScenarioPlan(scenario, tuple(kind.plan(scenario, options)), options, ledger.total,
                                  ledger.planned, seed, repro))
    if runner is not None and kind.splittable and len(plans) > 1:
        from .shards import planned_on

        worker_options = dataclasses.replace(options, executor=None, progress=None, monitor=None)
        planned = planned_on(runner, kind, [dataclasses.replace(p, options=worker_options) for p in plans])
        for _, made in planned:
            remember_plans(made)
        parts = [count for count, _ in planned]
    else:
        parts = [parts_of(kind, plan, ledger) for plan in plans]
    known = known_plans()
    return [dataclasses.replace(plan, parts=count, sample_plans=known) for plan, count in zip(plans, parts)]


def _prepared(kind, sampler, scenarios, options) -> tuple:
    """``(scenarios, screen, options)``: what to run, what the report's ``screen`` says, and the options with the
    sampler's name and the scenarios' source filled in."""
    check_sampler(sampler, kind.keywords, kind.role)
    if isinstance(scenarios, str):  # a MODULE:ATTR path of a scenario list (or of a callable returning one)
        source, scenarios = scenarios, _load_scenarios(scenarios)
    else:
        source = None if scenarios is None else False
    if options.scenarios_source is None:
        options = dataclasses.replace(options, scenarios_source=source)
    name = options.sampler_name or qualified_name(sampler)
    if options.sampler_name is None:
        options = dataclasses.replace(options, sampler_name=name if resolves_to(name, sampler) else None)
    scenarios, screen = kind.prepare(scenarios, options.checks)
    for s in scenarios:
        if not isinstance(s, kind.scenario_type):
            raise TypeError(f"scenarios must be {kind.scenario_type.__name__} objects; got {type(s).__name__}.")
    return scenarios, screen, options


def run(kind, sampler, scenarios, options) -> CheckReport:
    """Check ``sampler`` of ``kind`` (a :class:`~specdec_check.checker.core.kind.Kind`) on ``scenarios`` (None: the
    kind's default battery) under validated ``options``.

    Every scenario's statistical tests are planned first, so one alpha ledger splits the run's budget over
    all of them (Bonferroni); each scenario then runs on its own random stream, keyed by the seed and its
    name. The verdict needs evidence: a run whose scenarios' law tests did not reach the mode's design
    resolution is inconclusive, never passed. With ``options.executor`` the scenarios run as shards on it
    (:mod:`.shards`) and are merged in battery order: the same report as in this process, timings aside.
    """
    scenarios, screen, options = _prepared(kind, sampler, scenarios, options)
    tests = [kind.plan(s, options) for s in scenarios]
    ledger = stats.AlphaLedger(options.alpha, planned=max(1, sum(len(t) for t in tests)))
    backend, monitor, progress = options.backend, options.monitor, options.progress
    header = dict(kind=kind.name, sampler=options.sampler_name or qualified_name(sampler), mode=options.mode.name,
                  backend=backend.name, device=options.device_template or backend.device, dtype=backend.dtype,
                  tolerance=float(backend.tolerance), seed=options.seed, alpha=options.alpha,
                  alpha_per_check=ledger.per_check, design_tv=options.mode.design_tv, checks=tuple(options.checks),
                  strict=options.strict, screen=screen, rule=options.rule)
    if getattr(kind, "drafting", None) is not None:  # a tree kind: the scheme its verifier is checked under
        header["drafting"] = kind.drafting
    if getattr(sampler, "seeded_only", False):  # outside this process: the protocol's version (notes/PROTOCOL.md)
        from ...foreign._protocol import PROTOCOL_VERSION

        header["protocol"] = PROTOCOL_VERSION
    if monitor is not None:
        monitor.run_started(dict(header, checks=list(header["checks"])), [s.name for s in scenarios])
    started = time.perf_counter()
    plans = None
    findings, records, summaries, samples = [], [], [], 0
    diagnosed = not any(kind.diagnosable(s) for s in scenarios)
    # The backend's settings for the run (torch on the CPU: one thread) and one BLAS thread, here and in
    # every shard, so the arithmetic (and the report) is the same whatever runs the scenarios. Planning too: the
    # sample-size plans' calibrations multiply matrices (the Chernoff bound's inverse transform), and a second
    # OpenBLAS thread doubled their CPU time for no gain in wall time (the token battery's two plans at 2^20 outputs
    # a call: 4.8 -> 2.8 s).
    with contextlib.ExitStack() as stack:
        stack.enter_context(one_blas_thread())
        stack.enter_context(backend.running())
        if options.executor is None:
            plans = _plans(kind, scenarios, options, ledger)
            finished = _run_here(kind, sampler, plans, ledger, progress)
        else:  # planned, then run as shards on the executor, handed back in battery order
            runner = stack.enter_context(ShardRunner(options.executor))
            plans = _plans(kind, scenarios, options, ledger, runner)
            finished = run_sharded(kind, sampler, plans, options, ledger, progress, runner=runner)
        for i, (outcome, diagnosis) in enumerate(finished):
            if options.executor is not None:
                for label in outcome.spent:  # the worker's spending, in the run's ledger
                    ledger.spend(label)
            if not diagnosed and any(f.kind == "failure" for f in outcome.findings):
                diagnosed = diagnosis(outcome)
            findings += outcome.findings
            records += outcome.records
            summaries.append(dataclasses.replace(outcome.summary, achieved_tv=achieved_resolution(outcome.records)))
            samples += outcome.samples
            if monitor is not None:
                monitor.scenario_finished(i, [f.to_dict() for f in outcome.findings],
                                          [r.to_dict() for r in outcome.records], summaries[-1].to_dict())
    if progress is not None:
        total = sum(p.parts for p in plans)
        progress(total, total, "done")
    defaults = {id(s) for s in kind.default_battery()}
    gaps = evidence_gaps(summaries, options.mode.design_tv, own={s.name for s in scenarios if id(s) not in defaults},
                         failed={f.scenario for f in findings if f.kind == "failure"}, mode=options.mode.name)
    resolved = [s.achieved_tv for s in summaries if s.achieved_tv is not None]
    findings = by_cause(findings, getattr(kind, "output_law_checks", ()))
    verdict = verdict_of((f.kind for f in findings), inconclusive=bool(gaps))
    return CheckReport(
        **header, passed=verdict in PASSING_VERDICTS, findings=tuple(findings), results=tuple(records),
        scenarios=tuple(summaries), samples_used=int(samples), elapsed_s=time.perf_counter() - started,
        inconclusive=gaps, achieved_tv=max(resolved) if resolved else None,
    )
