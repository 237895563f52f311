"""The options of a check, validated once for the API, the command line and the pytest plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED, RULES, Mode, get_mode, open_unit
from ._backend import Backend
from ._backends import make_backend
from ._shards import check_executor, device_of_template

__all__ = ["MONITOR_METHODS", "CheckOptions", "check_options"]

#: What a monitor implements (e.g. specdec_check._isolation's channel to the supervising process):
#: ``run_started(header, scenario_names)``, ``call_started(scenario, index)``, ``call_finished(scenario,
#: index)`` around every sampler call, and ``scenario_finished(index, findings, records, summary)``.
MONITOR_METHODS = ("run_started", "call_started", "call_finished", "scenario_finished")


@dataclass(frozen=True)
class CheckOptions:
    """How one check runs: mode, backend, seed, false-alarm budget, selected checks, progress callback.

    Build it with :func:`check_options`, which validates every field and says how to fix a bad one.
    """

    mode: Mode
    backend: Backend
    seed: int
    alpha: float
    checks: tuple
    progress: Callable | None = None
    #: Robustness warnings (NaN inputs, degenerate shapes) count as failures.
    strict: bool = False
    #: ``MODULE:CALLABLE`` naming the sampler in the report and repro lines (None: found by the session).
    sampler_name: str | None = None
    #: Where the scenarios came from: None (the default battery), a ``MODULE:ATTR`` path, or False
    #: (objects built in Python: no command line reproduces the run).
    scenarios_source: str | bool | None = None
    #: Told about every sampler call and every finished scenario (see :data:`MONITOR_METHODS`), or None.
    monitor: object = None
    #: What the verifier is judged against: "standard" or "any" lossless rule (:data:`specdec_check._settings.RULES`).
    rule: str = "standard"
    #: Where the scenarios run (:func:`specdec_check.checker._shards.check_executor`): None in this process, a
    #: :class:`~specdec_check.checker._shards.LocalProcesses` pool the run owns, or a ``concurrent.futures.Executor``.
    executor: object = None
    #: A device with ``{worker}`` in it (``"cuda:{worker}"``): each worker runs on its own device.
    device_template: str | None = None


def check_options(known_checks, *, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND, device=None, dtype=None,
                  seed=DEFAULT_SEED, alpha=DEFAULT_ALPHA, checks=None, progress=None, strict=False,
                  name=None, scenarios_source=None, monitor=None, rule="standard", executor=None) -> CheckOptions:
    """Validate the options of a check of a sampler kind whose selectable checks are ``known_checks``.

    Raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) naming the option, the value
    given and what is allowed. ``executor``: see :func:`specdec_check.checker._shards.check_executor`;
    a ``device`` with ``{worker}`` in it is a template (validated with worker 0).
    """
    mode = get_mode(mode)
    alpha = open_unit(alpha, "alpha (the false-alarm budget of the whole run)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0; got {seed!r}.")
    if checks is None:
        checks = tuple(known_checks)
    else:
        checks = (checks,) if isinstance(checks, str) else tuple(checks)
        unknown = [c for c in checks if c not in known_checks]
        if unknown:
            under = f" under rule={rule!r}" if rule != "standard" else ""
            raise ValueError(f"unknown check(s) {unknown}{under}; choose from {tuple(known_checks)}.")
    if progress is not None and not callable(progress):
        raise TypeError("progress must be None or a callable progress(done, total, label).")
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be True or False; got {strict!r}.")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}; got {rule!r} ('standard': Leviathan et al.'s rule exactly; "
                         "'any': any lossless rule, such as block verification).")
    if monitor is not None and not all(callable(getattr(monitor, m, None)) for m in MONITOR_METHODS):
        raise TypeError(f"monitor must be None or an object with the methods {', '.join(MONITOR_METHODS)}.")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise TypeError(f"name must be None or the sampler's MODULE:CALLABLE path; got {name!r}.")
    executor = check_executor(executor)
    device, template = device_of_template(device)
    return CheckOptions(mode=mode, backend=make_backend(backend, device=device, dtype=dtype), seed=int(seed),
                        alpha=alpha, checks=checks, progress=progress, strict=strict,
                        sampler_name=None if name is None else name.strip(), scenarios_source=scenarios_source,
                        monitor=monitor, rule=rule, executor=executor, device_template=template)
