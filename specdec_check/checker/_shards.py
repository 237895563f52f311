"""Scale-out: a check's shards on any ``concurrent.futures`` executor, merged in battery order.

A shard is one scenario's run, or one block range of it (:mod:`._parts`: a law loop planning more
rows than the mode's ``shard_rows``). Every shard is independent: its random stream is keyed by the
run's seed, the scenario's name and the part (:func:`~specdec_check.checker._parts.part_seed`), its
tests spend fixed shares of one alpha ledger (``total / planned``, Bonferroni) and nothing it computes
depends on another shard. A shard (:class:`ScenarioShard`) runs wherever an executor puts it (this
process, a :class:`LocalProcesses` pool, a Dask cluster through ``Client(...).get_executor()``) and
returns what it produced (:class:`ShardResult`). The driver merges the results in shard order and
drops a split scenario's later shards once its merged evidence concludes it, so the report is the
same whatever ran the shards and in whatever order they finished (timings aside).

No scheduler lives here: ``concurrent.futures`` or the user's executor schedules; this module names
the work, ships it (the sampler by ``MODULE:CALLABLE`` where it has one), reruns the shards of a
worker that died (an owned pool only: a shard's result depends on its seed alone) and merges.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import functools
import os
import pickle
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._blas import one_blas_thread
from ._parts import part_seed

__all__ = ["POOL_RESTARTS", "LocalProcesses", "RemoteExit", "ScenarioShard", "ShardResult", "ShardsLost", "available_cores",
           "check_executor", "device_of_template", "resolves_to", "run_shard", "run_sharded", "worker_index"]

#: How many times a pool the run owns is rebuilt after a worker process died: the lost shards rerun from
#: their seeds (same evidence), so a worker killed once (OOM killer, a preempted node) costs time, not the
#: run; a sampler that kills every process it runs in fails the run after this many rebuilds.
POOL_RESTARTS = 2
#: The placeholder of a device template (``"cuda:{worker}"``): the worker's index, so each worker of a
#: multi-GPU host runs on its own device.
WORKER_FIELD = "worker"
#: Exception class names by which executors other than ``concurrent.futures`` say a worker was lost
#: (Dask's ``distributed.scheduler.KilledWorker`` after its own retries).
_LOST_WORKER_ERRORS = ("KilledWorker",)


class ShardsLost(RuntimeError):
    """Shards of a run were lost with the workers running them: the run cannot finish (no shard is dropped)."""


class RemoteExit(BaseException):
    """A BaseException a worker's sampler raised that cannot travel back as it is (a class defined inside a
    function does not pickle): its type and message, still a BaseException, so the run ends as a crash."""


def _sendable(work):
    """``work`` for a worker: what it raises comes back to the driver, as it is where it pickles, else as
    :class:`RemoteExit` (a BaseException) or a RuntimeError (an Exception) naming its type and message, not as
    the executor's own pickling error."""
    @functools.wraps(work)
    def sendable(*args):
        try:
            return work(*args)
        except BaseException as exc:  # noqa: BLE001 - sorted below, outside this block
            failed = exc
        try:
            pickle.dumps(failed)  # with its chain where tblib's pickling support is installed (distributed does)
        except Exception:  # noqa: BLE001 - any pickling failure: send what it was instead
            what = f"{type(failed).__module__}.{type(failed).__qualname__}: {failed}"
        else:
            raise failed
        # Raised here, outside the handlers: no __context__ chain back to the exception that does not pickle.
        raise RuntimeError(what) if isinstance(failed, Exception) else RemoteExit(what)
    return sendable


@dataclass(frozen=True)
class LocalProcesses:
    """A local process pool the run creates and shuts down: ``workers`` processes (None: the cores this
    process may use). ``executor="processes"`` (all cores) or ``executor=N`` build one."""

    workers: int | None = None

    def size(self) -> int:
        return self.workers or available_cores()


def available_cores() -> int:
    """The cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def check_executor(executor):
    """Validate ``executor=``: None (run in this process), ``"processes"`` (a local process pool over the
    cores), an int ``N >= 1`` (a local pool of N processes), or any object with ``submit(fn, *args)``
    returning a ``concurrent.futures.Future`` (a ``ProcessPoolExecutor``, loky's, Dask's
    ``Client(...).get_executor()``). Returns None, a :class:`LocalProcesses` or the executor."""
    if executor is None or isinstance(executor, LocalProcesses):
        return executor
    if isinstance(executor, str):
        if executor == "processes":
            return LocalProcesses()
        raise ValueError(f"executor must be None, 'processes', a number of processes or a concurrent.futures.Executor "
                         f"(e.g. distributed.Client(address).get_executor()); got the string {executor!r}.")
    if isinstance(executor, (int, np.integer)) and not isinstance(executor, bool):
        if executor < 1:
            raise ValueError(f"executor as a number of local processes must be >= 1; got {executor}.")
        return LocalProcesses(int(executor))
    if callable(getattr(executor, "submit", None)):
        return executor
    raise TypeError(f"executor must be None, 'processes', a number of processes or an object with submit(fn, *args) "
                    f"(a concurrent.futures.Executor, or distributed.Client(address).get_executor() for Dask); "
                    f"got {type(executor).__name__} {executor!r}.")


def device_of_template(device):
    """``(device for worker 0, template or None)``: a device holding ``{worker}`` (``"cuda:{worker}"``) is a
    template each worker fills with its index (:func:`worker_index`); any other device passes through."""
    if not isinstance(device, str) or "{" not in device:
        return device, None
    try:
        return device.format(**{WORKER_FIELD: 0}), device
    except (KeyError, IndexError, ValueError):
        raise ValueError(f"a device template may hold only {{{WORKER_FIELD}}} (e.g. 'cuda:{{{WORKER_FIELD}}}'); "
                         f"got {device!r}.") from None


def resolves_to(name: str, sampler) -> bool:
    """Whether ``name`` (``MODULE:CALLABLE``) imports back to ``sampler`` (a closure, a partial or an
    instance does not): only then can a report's repro line, or a worker, rebuild it from the name."""
    import pkgutil

    try:
        return pkgutil.resolve_name(name) is sampler
    except Exception:  # noqa: BLE001 - any failure means the name does not reproduce the sampler
        return False


# --------------------------------------------------------------------------- the worker's side

#: This process's index in a pool the run owns (set by the pool's initializer; None elsewhere).
_SLOT: int | None = None


def _take_slot(slots) -> None:
    global _SLOT
    _SLOT = int(slots.get())


def worker_index() -> int:
    """The index a device template is filled with: this process's slot in a pool the run owns (0..N-1),
    else a Dask worker's integer name (a ``LocalCluster`` names its workers 0..N-1), else 0."""
    if _SLOT is not None:
        return _SLOT
    if "distributed" in sys.modules:
        try:
            from distributed import get_worker

            name = get_worker().name
            return int(name) if isinstance(name, (int, np.integer)) or str(name).isdigit() else 0
        except (ImportError, ValueError):  # not inside a Dask worker
            pass
    return 0


@dataclass(frozen=True)
class ScenarioShard:
    """One scenario's run as a unit of work: everything a worker needs, all of it picklable.

    ``sampler`` is the sampler itself, or None when ``sampler_path`` (its ``MODULE:CALLABLE``) is
    re-imported on the worker; ``run_scenario`` and ``diagnose`` are the kind's (module-level functions,
    or partials of them); ``alpha`` and ``planned`` rebuild the run's ledger, so each test gets the very
    share it gets in one process; ``seed`` is the scenario's stream.
    """

    index: int
    name: str
    run_scenario: Callable
    diagnose: Callable | None
    sampler: object
    sampler_path: str | None
    scenario: object
    plan: tuple
    options: object
    alpha: float
    planned: int
    seed: np.random.SeedSequence
    repro: str
    #: Which block range of the scenario's law loop (0: the first, which runs every other check too), of how many.
    part: int = 0
    parts: int = 1


@dataclass
class ShardResult:
    """What one scenario produced: its findings, records, summary, samples and calls, whether it stopped
    early, the ledger labels it spent (in order) and its stream's state after the run (a diagnosis of its
    failure continues that stream, as it does in one process). ``worker`` names where it ran (not reported)."""

    index: int
    findings: list
    records: list
    summary: object
    samples: int
    calls: int
    stopped: bool
    spent: list
    rng_state: dict
    worker: str = ""
    part: int = 0
    evidence: object = None


def _sampler_of(shard):
    if shard.sampler_path is None:
        return shard.sampler
    from .._settings import resolve_callable

    return resolve_callable(shard.sampler_path, what="sampler")


def _state(shard, options=None):
    """A fresh :class:`ScenarioRun` of ``shard`` on this worker (the device template filled in)."""
    from .. import stats
    from ._scenario_run import ScenarioRun

    options = shard.options if options is None else options
    if options.device_template is not None:
        from ._backends import make_backend

        device = options.device_template.format(**{WORKER_FIELD: worker_index()})
        options = dataclasses.replace(options, backend=make_backend(options.backend.name, device=device,
                                                                    dtype=options.backend.dtype))
    ledger = stats.AlphaLedger(shard.alpha, planned=shard.planned)
    state = ScenarioRun(shard.scenario, list(shard.plan), options, ledger, np.random.default_rng(shard.seed), shard.repro)
    state.part, state.parts = shard.part, shard.parts
    return state


def _where() -> str:
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


@_sendable
def run_shard(shard: ScenarioShard) -> ShardResult:
    """Run one scenario (on whatever worker calls this) and return what it produced."""
    sampler = _sampler_of(shard)
    state = _state(shard)
    with one_blas_thread(), state.backend.running():
        shard.run_scenario(state, sampler)
    if state.parts != shard.parts:
        raise RuntimeError(f"scenario {shard.name!r} ran in {state.parts} shard(s) where its plan made {shard.parts} "
                           "(a bug in specdec-check).")
    return _result_of(shard, state)


def _result_of(shard, state) -> ShardResult:
    return ShardResult(shard.index, list(state.findings), list(state.records), state.summary, int(state.samples),
                       int(state.calls), bool(state.stopped), [label for label, _ in state.ledger.entries],
                       state.rng.bit_generator.state, _where(), shard.part, state.evidence)


@_sendable
def diagnose_shard(shard: ScenarioShard, result: ShardResult) -> tuple:
    """The kind's diagnosis of ``shard``'s failure, on a worker: the scenario's state is rebuilt from
    ``result`` (findings, records, calls, and its stream where the run left it). Returns ``(ran, findings)``."""
    sampler = _sampler_of(shard)
    state = _state(shard)
    state.findings, state.records = list(result.findings), list(result.records)
    state.samples, state.calls, state.stopped, state.summary = result.samples, result.calls, result.stopped, result.summary
    state.rng.bit_generator.state = result.rng_state
    with one_blas_thread(), state.backend.running():
        ran = bool(shard.diagnose(state, sampler))
    return ran, list(state.findings)


# --------------------------------------------------------------------------- the driver's side

def _shipped_sampler(sampler, name):
    """``(sampler, None)`` or ``(None, MODULE:CALLABLE)``: by name where ``name`` imports back to the sampler
    (re-imported on each worker), else the object if it pickles; a clear TypeError otherwise."""
    if name is not None and resolves_to(name, sampler):
        return None, name
    try:
        pickle.dumps(sampler)
    except Exception as exc:  # noqa: BLE001 - any pickling failure gets the same advice
        from ._callables import qualified_name

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


def _pool_context():
    """fork where it is safe (Linux, CUDA not initialised in this process), else spawn (workers import afresh)."""
    import multiprocessing

    torch = sys.modules.get("torch")
    try:
        cuda = bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a half-imported torch: assume the worst
        cuda = True
    method = "fork" if sys.platform.startswith("linux") and not cuda else "spawn"
    return multiprocessing.get_context(method)


def _is_lost_worker(exc: BaseException) -> bool:
    return isinstance(exc, cf.BrokenExecutor) or type(exc).__name__ in _LOST_WORKER_ERRORS


@dataclass(frozen=True)
class _Raised:
    """A shard that raised (not a lost worker): re-raised when the run reaches it in shard order."""

    exception: BaseException


class ShardRunner:
    """Submits shards to an executor and hands their results back in shard order.

    A :class:`LocalProcesses` spec becomes a ``ProcessPoolExecutor`` this runner owns (each worker takes
    a slot 0..N-1 for device templates) and shuts down; when one of its workers dies, the pool is
    rebuilt and every unfinished shard resubmitted (at most :data:`POOL_RESTARTS` times). A user's
    executor is used as it is and never shut down; a lost worker there (after its own retries) fails the
    run with :class:`ShardsLost` naming the scenarios whose shards were lost.
    """

    def __init__(self, executor):
        self.spec = executor if isinstance(executor, LocalProcesses) else None
        self.executor = None if self.spec is not None else executor
        self.restarts = 0

    def __enter__(self):
        if self.spec is not None:
            self._start_pool()
        return self

    def __exit__(self, *exc_info):
        if self.spec is not None and self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None

    def _start_pool(self) -> None:
        context = _pool_context()
        size = self.spec.size()
        slots = context.Queue()
        for slot in range(size):
            slots.put(slot)
        self.executor = cf.ProcessPoolExecutor(max_workers=size, mp_context=context, initializer=_take_slot,
                                               initargs=(slots,))

    def _restart(self, names, exc) -> None:
        """After a lost worker: a fresh pool (owned), or :class:`ShardsLost`."""
        if self.spec is None or self.restarts >= POOL_RESTARTS:
            why = (f"a worker process died {self.restarts + 1} times" if self.spec is not None
                   else "a worker running them was lost")
            raise ShardsLost(
                f"the shards of scenario(s) {', '.join(map(repr, names))} were lost: {why} ({type(exc).__name__}: "
                f"{exc}). A sampler that ends its process, or one that exhausts memory, does this; run in this "
                "process (executor=None, or the command line without --workers) to see which call.") from exc
        self.restarts += 1
        self.executor.shutdown(wait=True, cancel_futures=True)
        self._start_pool()

    def _submit(self, fn, *args):
        return self.executor.submit(fn, *args)

    def results(self, shards, progress=None, dropped=None):
        """Yield ``run_shard(shard)`` for every shard, in shard order, as soon as each one and those before it
        are done. Shards whose index the consumer adds to ``dropped`` (a set) are cancelled, or their results
        discarded if they already run: a scenario concluded by its earlier shards needs no later one."""
        by_index = {shard.index: shard for shard in shards}
        order = [shard.index for shard in shards]
        dropped = set() if dropped is None else dropped
        futures = {self._submit(run_shard, shard): shard.index for shard in shards}
        done, position = {}, 0
        try:
            while True:
                while position < len(order):  # hand back what is next in order; skip what was dropped
                    index = order[position]
                    if index in dropped:
                        done.pop(index, None)
                        for future in [f for f, i in futures.items() if i == index]:
                            future.cancel()
                            del futures[future]
                    elif index in done:
                        result = done.pop(index)
                        if isinstance(result, _Raised):  # raised in order: a shard dropped first never raises
                            if progress is not None:  # the scenario it came from (a partial report names it)
                                progress(position, len(order), by_index[index].name)
                            raise result.exception
                        yield result
                    else:
                        break
                    position += 1
                if position >= len(order):
                    return
                finished, _ = cf.wait(list(futures), return_when=cf.FIRST_COMPLETED)
                lost = None
                for future in finished:
                    index = futures.pop(future)
                    try:
                        done[index] = future.result()
                    except BaseException as exc:  # a SystemExit from a worker too: it ends the run, in shard order
                        if isinstance(exc, Exception) and _is_lost_worker(exc):
                            lost = exc
                        else:
                            done[index] = _Raised(exc)
                    else:
                        if progress is not None:
                            progress(len(done) + position, len(order), f"{_label(by_index[index])} done")
                if lost is not None:
                    for future, index in futures.items():  # shards that finished before the pool broke are kept
                        if future.done() and not future.cancelled() and future.exception() is None:
                            done[index] = future.result()
                        future.cancel()
                    unfinished = [i for i in order[position:] if i not in done and i not in dropped]
                    self._restart(sorted({by_index[i].name for i in unfinished}), lost)
                    futures = {self._submit(run_shard, by_index[i]): i for i in unfinished}
        finally:
            for future in futures:
                future.cancel()

    def call(self, fn, *args, name: str = ""):
        """``fn(*args)`` on the executor, waited for (a lost worker: a fresh pool and one more try, as above)."""
        while True:
            try:
                return self._submit(fn, *args).result()
            except Exception as exc:  # noqa: BLE001
                if not _is_lost_worker(exc):
                    raise
                self._restart([name], exc)


def _label(shard) -> str:
    return shard.name if shard.parts == 1 else f"{shard.name} [shard {shard.part + 1}/{shard.parts}]"


def run_sharded(kind, sampler, scenarios, plans, options, ledger, seeds, repros, progress=None, parts=None):
    """Run every scenario as shards on ``options.executor``; yield ``(result, diagnose)`` in battery order.

    A scenario is ``parts[i]`` shards (block ranges of its law loop, seeded by
    :func:`~specdec_check.checker._session.part_seed`); they run side by side and merge in shard order
    (``kind.merge_part``) until the kind says the scenario is concluded (it stopped, or a merged
    e-process rejected): the later shards are then cancelled. ``diagnose()`` (None for kinds without a
    diagnosis) runs the kind's diagnosis of that scenario's failure on the executor, updates
    ``result.findings`` and returns whether it ran.
    """
    parts = [1] * len(scenarios) if parts is None else list(parts)
    shipped, path = _shipped_sampler(sampler, options.sampler_name)
    worker_options = dataclasses.replace(options, executor=None, progress=None, monitor=None)
    shards, first = [], []
    for i, (s, plan) in enumerate(zip(scenarios, plans)):
        first.append(len(shards))
        for part in range(parts[i]):
            shards.append(ScenarioShard(len(shards), s.name, kind.run_scenario, kind.diagnose, shipped, path, s,
                                        tuple(plan), worker_options, ledger.total, ledger.planned,
                                        part_seed(seeds[i], part), repros[i], part, parts[i]))
    _check_picklable(shards)
    dropped: set = set()
    with ShardRunner(options.executor) as runner:
        results = runner.results(shards, progress=progress, dropped=dropped)
        for i, start in enumerate(first):
            head_shard, result = shards[start], next(results)
            if parts[i] > 1:
                result = _merged(kind, head_shard, result, results, dropped, range(start + 1, start + parts[i]))

            def diagnose(shard=head_shard, result=result):
                ran, findings = runner.call(diagnose_shard, shard, result, name=shard.name)
                result.findings = findings
                return ran

            yield result, (diagnose if kind.diagnose is not None else None)


def _merged(kind, head_shard, result, results, dropped, later) -> ShardResult:
    """A split scenario's first shard's ``result`` with its later shards' merged in, in order, until the
    scenario concludes (the rest are dropped); then concluded on this side (no sampler call)."""
    state = _state(head_shard)
    state.findings, state.records, state.evidence = list(result.findings), list(result.records), result.evidence
    state.samples, state.calls, state.stopped = result.samples, result.calls, result.stopped
    for index in later:
        if kind.concluded(state):
            dropped.update(range(index, later.stop))
            break
        kind.merge_part(state, next(results))
    kind.conclude(state)
    merged = _result_of(head_shard, state)
    merged.spent = list(result.spent) + merged.spent  # the first shard's spending, then the conclusion's
    merged.rng_state, merged.worker = result.rng_state, result.worker  # a diagnosis continues the first's stream
    return merged
