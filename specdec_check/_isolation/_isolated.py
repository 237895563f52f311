"""One callable in a child process: its result, its Exception, or an error saying how it ended.

For test runners (the pytest plugin and suite): a sampler that calls ``os._exit(0)`` inside a
test would otherwise end pytest itself with status 0 and every later test unrun.
"""

from __future__ import annotations

import functools
import pickle

from ._process import describe_exception
from ._supervisor import ChannelMonitor, supervise

__all__ = ["IsolationError", "SamplerCrashed", "SamplerTimeout", "run_isolated"]


class IsolationError(RuntimeError):
    """The isolated call ended without returning. Attributes: ``how`` (what happened, in words),
    ``call`` (``(scenario, index)`` of the sampler call in progress, or None), ``header`` and
    ``scenarios`` (the run's metadata and the scenario parts received before the end: each a dict
    with ``index``, ``findings``, ``records``, ``summary``), ``facts`` (an escaped BaseException's
    type, message and traceback, or None)."""

    def __init__(self, message, *, how="", call=None, header=None, scenarios=(), facts=None):
        super().__init__(message)
        self.how, self.call, self.header, self.scenarios, self.facts = how, call, header, list(scenarios), facts


class SamplerCrashed(IsolationError):
    """The child exited, was killed by a signal, or a BaseException (SystemExit, KeyboardInterrupt,
    GeneratorExit, a custom subclass) escaped the callable."""


class SamplerTimeout(IsolationError):
    """A sampler call ran past ``call_timeout``, or the whole call past ``timeout``; the child was killed."""


class _RemoteTraceback(Exception):
    """The child's traceback, chained under an Exception re-raised in the parent."""

    def __init__(self, text):
        super().__init__(text)
        self.text = text

    def __str__(self):
        return self.text


def _call(func, args, kwargs, pass_monitor, channel):
    """In the child: ``func(*args, **kwargs)`` with ``monitor=`` added when asked; Exceptions are returned."""
    if pass_monitor:
        kwargs = {**kwargs, "monitor": ChannelMonitor(channel)}
    try:
        return ("ok", func(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - re-raised in the parent
        facts = describe_exception(exc, lines=None)
        try:
            pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an unpicklable exception travels as text only
            exc = None
        return ("error", exc, facts)


def run_isolated(func, /, *args, timeout: float | None = None, call_timeout: float | None = None,
                 pass_monitor: bool = False, start_method: str | None = None, **kwargs):
    """``func(*args, **kwargs)`` run in a child process; its return value (pickled back).

    An Exception raised by ``func`` is raised again here (with the child's traceback chained as
    its ``__cause__``). If the child ends any other way, :class:`SamplerCrashed` says how (it
    exited, e.g. ``os._exit(0)``; a signal killed it; a BaseException such as ``SystemExit``
    escaped); if it runs past ``timeout`` seconds (the whole call) or one sampler call runs past
    ``call_timeout`` seconds, it is killed and :class:`SamplerTimeout` is raised. Per-call limits
    need ``pass_monitor=True``: ``func`` then receives ``monitor=`` (pass it to ``check_verifier``
    or ``check_generator``), and the error carries the scenarios finished before the end.

    The child is forked where that is safe (Linux, CUDA not initialised in this process), so
    ``func`` may be a closure; otherwise it is spawned and ``func`` and its arguments must pickle.
    The child ends with ``os._exit`` once it has sent its result: threads it leaves behind do not
    keep it alive.
    """
    for name, value in (("timeout", timeout), ("call_timeout", call_timeout)):
        if value is not None and not value >= 0:
            raise ValueError(f"{name} must be None or a number of seconds >= 0; got {value!r}")
    if call_timeout and not pass_monitor:
        raise ValueError("call_timeout needs pass_monitor=True (the monitor reports each sampler call)")
    work = functools.partial(_call, func, args, kwargs, pass_monitor)
    outcome = supervise(work, call_timeout=call_timeout, total_timeout=timeout, start_method=start_method)
    state = outcome.state
    details = dict(call=outcome.call[:2] if outcome.call else None, header=state.header, scenarios=state.parts)
    where = f" during call {outcome.call[1]} of scenario {outcome.call[0]!r}" if outcome.call else ""
    if outcome.status == "returned":
        if outcome.value[0] == "ok":
            return outcome.value[1]
        exc, facts = outcome.value[1], outcome.value[2]
        if exc is None:
            raise RuntimeError(f"{facts['type']}: {facts['message']} (raised in the isolated child; it could not "
                               "be sent back)") from _RemoteTraceback(facts["traceback"])
        raise exc from _RemoteTraceback(facts["traceback"])
    if outcome.status == "timeout":
        if outcome.call is not None:
            how = f"the sampler did not return within {call_timeout:g} s"
        else:
            how = f"the isolated call did not finish within {timeout:g} s"
        raise SamplerTimeout(f"{how}{where}; the child process was killed", how=how, **details)
    if outcome.status == "raised" and (outcome.facts or {}).get("unsendable"):
        raise IsolationError(f"the isolated call returned, but {outcome.facts['message']} ({outcome.facts['type']})",
                             how="its result could not be pickled", facts=outcome.facts, **details)
    if outcome.status == "raised":
        facts = outcome.facts or {}
        how = f"raised {facts.get('type')}" + (f" ({facts['message']})" if facts.get("message") else "")
        raise SamplerCrashed(f"the isolated call {how}{where} instead of returning:\n{facts.get('traceback', '')}",
                             how=how, facts=facts, **details)
    raise SamplerCrashed(f"the process running the isolated call {outcome.how}{where} before returning",
                         how=outcome.how, **details)
