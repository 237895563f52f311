"""Scale-out: a check's shards on any ``concurrent.futures`` executor, merged in battery order.

A shard is one scenario's run, or one block range of it (:mod:`._parts`: a law loop planning more
rows than the mode's ``shard_rows``). Every shard is independent: its random stream is keyed by the
run's seed, the scenario's name and the part (:func:`~specdec_check.checker.core.parts.part_seed`), its
tests spend fixed shares of one alpha ledger (``total / planned``, Bonferroni) and nothing it computes
depends on another shard. A shard (:class:`ScenarioShard`) runs wherever an executor puts it (this
process, a :class:`LocalProcesses` pool, a Dask cluster through ``Client(...).get_executor()``) and
returns what it produced (a :class:`~specdec_check.checker.core.context.ScenarioOutcome`). The driver merges
the outcomes in shard order and
drops a split scenario's later shards once its merged evidence concludes it, so the report is the
same whatever ran the shards and in whatever order they finished (timings aside).

No scheduler lives here: ``concurrent.futures`` or the user's executor schedules; this module names
the work, ships it (the sampler by ``MODULE:CALLABLE`` where it has one), reruns the shards of a
worker that died (an owned pool only: a shard's result depends on its seed alone) and merges.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
from dataclasses import dataclass

import numpy as np

from ..backends.blas import one_blas_thread
from .executors import WORKER_FIELD, ShardRunner, sendable, worker_index

__all__ = ["ScenarioShard", "diagnose_shard", "resolves_to", "run_shard", "run_sharded", "shard_label"]


def shard_label(name: str, part: int, parts: int) -> str:
    """What progress calls part ``part`` (0-based) of a scenario run in ``parts`` shards."""
    return name if parts == 1 else f"{name} [shard {part + 1}/{parts}]"


def resolves_to(name: str, sampler) -> bool:
    """Whether ``name`` (``MODULE:CALLABLE``) imports back to ``sampler`` (a closure, a partial or an
    instance does not): only then can a report's repro line, or a worker, rebuild it from the name."""
    import pkgutil

    try:
        return pkgutil.resolve_name(name) is sampler
    except Exception:  # noqa: BLE001 - any failure means the name does not reproduce the sampler
        return False


@dataclass(frozen=True)
class ScenarioShard:
    """One scenario's run (or one block range of it) as a unit of work: everything a worker needs, all of it
    picklable. ``kind`` is the sampler kind (a value: rebuilt from its class and arguments); ``sampler`` the
    sampler itself, or None when ``sampler_path`` (its ``MODULE:CALLABLE``) is re-imported on the worker;
    ``plan`` the scenario's :class:`~specdec_check.checker.core.context.ScenarioPlan` (its ``alpha`` and
    ``planned`` rebuild the run's ledger, so each test gets the very share it gets in one process)."""

    index: int
    kind: object
    sampler: object
    sampler_path: str | None
    plan: object

    @property
    def name(self) -> str:
        return self.plan.scenario.name

    @property
    def label(self) -> str:
        """The scenario's name, with ``[shard i/n]`` where it is split."""
        return shard_label(self.name, self.plan.part, self.plan.parts)


def _sampler_of(shard):
    if shard.sampler_path is None:
        return shard.sampler
    from ..._settings import resolve_callable

    return resolve_callable(shard.sampler_path, what="sampler")


def _context(shard):
    """A fresh :class:`ScenarioContext` of ``shard`` on this worker (the device template filled in)."""
    from ... import stats
    from .context import ScenarioContext

    from .planning import remember_plans

    plan = shard.plan
    remember_plans(plan.sample_plans)
    options = plan.options
    if options.device_template is not None:
        from ..backends import make_backend

        device = options.device_template.format(**{WORKER_FIELD: worker_index()})
        options = dataclasses.replace(options, backend=make_backend(options.backend.name, device=device,
                                                                    dtype=options.backend.dtype))
        plan = dataclasses.replace(plan, options=options)
    ledger = stats.AlphaLedger(plan.alpha, planned=plan.planned)
    return ScenarioContext(shard.kind, plan, ledger, np.random.default_rng(plan.seed))


def _where() -> str:
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


@sendable
def run_shard(shard: ScenarioShard):
    """Run one scenario (on whatever worker calls this) and return its outcome."""
    from .loop import run_scenario

    sampler = _sampler_of(shard)
    ctx = _context(shard)
    with one_blas_thread(), ctx.backend.running():
        run_scenario(shard.kind, ctx, sampler)
    if ctx.parts != shard.plan.parts:
        raise RuntimeError(f"scenario {shard.name!r} ran in {ctx.parts} shard(s) where its plan made "
                           f"{shard.plan.parts} (a bug in specdec-check).")
    return _outcome_of(shard, ctx, ctx.evidence)


@sendable
def plan_shard(shard: ScenarioShard) -> tuple:
    """``(parts, sample-size plans)`` of ``shard``'s scenario, planned on a worker: the number of shards its plan
    splits it into (:func:`~specdec_check.checker.core.parts.parts_of`), and the plans that cost (side by side
    on the workers where they would run one after another in the driver)."""
    from ... import stats
    from .planning import known_plans
    from .parts import parts_of

    plan = shard.plan
    with one_blas_thread():
        parts = parts_of(shard.kind, plan, stats.AlphaLedger(plan.alpha, planned=plan.planned))
    return parts, known_plans()


def planned_on(runner, kind, plans) -> list:
    """``plans`` (each scenario's, not yet split) planned side by side on ``runner``'s executor: ``(parts, sample
    plans)`` per plan, in order (the driver's planning, which costs ~1.5 s per token scenario at TV 1e-3)."""
    shards = [ScenarioShard(i, kind, None, None, plan) for i, plan in enumerate(plans)]
    _check_picklable(shards)
    return list(runner.results(plan_shard, shards))


def _outcome_of(shard, ctx, evidence=None):
    outcome = ctx.outcome(evidence, _where())
    outcome.index = shard.index
    return outcome


@sendable
def diagnose_shard(shard: ScenarioShard, outcome) -> tuple:
    """The kind's diagnosis of ``shard``'s failure, on a worker: the scenario's context is rebuilt from its
    ``outcome`` (findings, records, calls, and its stream where the run left it). Returns ``(ran, findings)``."""
    from .diagnosis import diagnose

    sampler = _sampler_of(shard)
    ctx = _context(shard)
    ctx.adopt(outcome)
    with one_blas_thread(), ctx.backend.running():
        ran = bool(diagnose(shard.kind, ctx, sampler, outcome))
    return ran, list(outcome.findings)


# --------------------------------------------------------------------------- the driver's side

def _shipped_sampler(sampler, name):
    """``(sampler, None)`` or ``(None, MODULE:CALLABLE)``: by name where ``name`` imports back to the sampler
    (re-imported on each worker), else the object if it pickles; a clear TypeError otherwise."""
    if name is not None and resolves_to(name, sampler):
        return None, name
    try:
        pickle.dumps(sampler)
    except Exception as exc:  # noqa: BLE001 - any pickling failure gets the same advice
        from .callables import qualified_name

        raise TypeError(
            f"the sampler {qualified_name(sampler)} cannot be sent to the executor's workers ({type(exc).__name__}: "
            f"{exc}): a lambda, a function defined inside another function, or an object holding one does not "
            "pickle. Define it at module level and pass name='MODULE:CALLABLE' (each worker re-imports it), "
            "or run it in this process (executor=None).") from None
    return sampler, None


def _check_picklable(shards) -> None:
    for shard in shards:
        try:
            pickle.dumps(shard)
        except Exception as exc:  # noqa: BLE001
            raise TypeError(f"scenario {shard.name!r} cannot be sent to the executor's workers ({type(exc).__name__}: "
                            f"{exc}); build scenarios from module-level objects, or run in this process "
                            "(executor=None).") from None


def run_sharded(kind, sampler, plans, options, ledger, progress=None, runner=None):
    """Run every scenario as shards on ``options.executor``; yield ``(outcome, diagnosis)`` in battery order.

    A scenario is ``plan.parts`` shards (block ranges of its law loop, seeded by
    :func:`~specdec_check.checker.core.parts.part_seed`); they run side by side and merge in shard order
    (:func:`~specdec_check.checker.core.parts.merge_part`) until the scenario is concluded (it stopped, or a merged
    e-process rejected): the later shards are then cancelled. ``diagnosis(outcome)`` runs the kind's diagnosis of
    that scenario's failure on the executor, updates ``outcome.findings`` and returns whether it ran. ``runner``:
    a :class:`~specdec_check.checker.core.executors.ShardRunner` already started (the driver's planning used it).
    """
    from .parts import part_seed

    shipped, path = _shipped_sampler(sampler, options.sampler_name)
    worker_options = dataclasses.replace(options, executor=None, progress=None, monitor=None)
    shards, first = [], []
    for plan in plans:
        first.append(len(shards))
        plan = dataclasses.replace(plan, options=worker_options)
        for part in range(plan.parts):
            shards.append(ScenarioShard(len(shards), kind, shipped, path,
                                        dataclasses.replace(plan, seed=part_seed(plan.seed, part), part=part)))
    _check_picklable(shards)
    dropped: set = set()
    with contextlib.nullcontext(runner) if runner is not None else ShardRunner(options.executor) as runner:
        results = runner.results(run_shard, shards, progress=progress, dropped=dropped)
        for plan, start in zip(plans, first):
            head_shard, outcome = shards[start], next(results)
            if plan.parts > 1:
                outcome = _merged(kind, head_shard, outcome, results, dropped, range(start + 1, start + plan.parts))

            def diagnosis(outcome, shard=head_shard):
                ran, findings = runner.call(diagnose_shard, shard, outcome, name=shard.name)
                outcome.findings = findings
                return ran

            yield outcome, diagnosis


def _merged(kind, head_shard, outcome, results, dropped, later):
    """A split scenario's first shard's ``outcome`` with its later shards' merged in, in order, until the
    scenario concludes (the rest are dropped); then concluded on this side (no sampler call)."""
    from .loop import conclude
    from .parts import concluded, merge_part

    ctx = _context(head_shard)
    ctx.adopt(outcome)
    ctx.evidence = outcome.evidence
    for index in later:
        if concluded(ctx):
            dropped.update(range(index, later.stop))
            break
        merge_part(ctx, next(results))
    conclude(kind, ctx)
    merged = _outcome_of(head_shard, ctx)
    merged.spent = list(outcome.spent) + merged.spent  # the first shard's spending, then the conclusion's
    merged.rng_state, merged.worker = outcome.rng_state, outcome.worker  # a diagnosis continues the first's stream
    return merged
