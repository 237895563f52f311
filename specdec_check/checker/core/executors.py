"""Executors for scale-out: what ``executor=`` may be, the process pool a run owns (one slot per worker,
for device templates), shipping a worker's exceptions back, and :class:`ShardRunner`, which submits units of
work and hands their results back in order (rebuilding an owned pool whose worker died).

Nothing here knows what a shard computes (:mod:`.shards` does): a unit of work is any picklable object with
``index`` and ``label``, run by a module-level function wrapped with :func:`sendable`.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import os
import pickle
import sys
from dataclasses import dataclass

import numpy as np

__all__ = ["POOL_RESTARTS", "WORKER_FIELD", "LocalProcesses", "RemoteExit", "ShardRunner", "ShardsLost",
           "available_cores", "check_executor", "device_of_template", "sendable", "worker_index"]

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


def sendable(work):
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

# --------------------------------------------------------------------------- a worker's slot

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

    def results(self, work, shards, progress=None, dropped=None):
        """Yield ``work(shard)`` for every shard, in shard order, as soon as each one and those before it
        are done. Shards whose index the consumer adds to ``dropped`` (a set) are cancelled, or their results
        discarded if they already run: a scenario concluded by its earlier shards needs no later one."""
        by_index = {shard.index: shard for shard in shards}
        order = [shard.index for shard in shards]
        dropped = set() if dropped is None else dropped
        futures = {self._submit(work, shard): shard.index for shard in shards}
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
                            progress(len(done) + position, len(order), f"{by_index[index].label} done")
                if lost is not None:
                    for future, index in futures.items():  # shards that finished before the pool broke are kept
                        if future.done() and not future.cancelled() and future.exception() is None:
                            done[index] = future.result()
                        future.cancel()
                    unfinished = [i for i in order[position:] if i not in done and i not in dropped]
                    self._restart(sorted({by_index[i].name for i in unfinished}), lost)
                    futures = {self._submit(work, by_index[i]): i for i in unfinished}
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
