"""The options of a check, validated once (through the option table, :mod:`specdec_check._options`) for the
API, the command line and the pytest plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..._options import api_options
from ..._settings import RULES, Mode
from ..backends import make_backend
from ..backends.base import Backend
from .executors import check_executor, device_of_template

__all__ = ["FIELDS", "MONITOR_METHODS", "CheckOptions", "backend_option", "check_options", "executor_option",
           "monitor_option"]

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
    #: Where the scenarios run (:func:`specdec_check.checker.core.executors.check_executor`): None in this process, a
    #: :class:`~specdec_check.checker.core.executors.LocalProcesses` pool the run owns, or a ``concurrent.futures.Executor``.
    executor: object = None
    #: A device with ``{worker}`` in it (``"cuda:{worker}"``): each worker runs on its own device.
    device_template: str | None = None


#: The options that are fields of :class:`CheckOptions` (the others the ``check_*`` functions use themselves).
FIELDS = ("mode", "backend", "device", "dtype", "seed", "alpha", "rule", "strict", "checks", "progress", "name",
          "monitor", "executor")


def check_options(kind, *, scenarios_source=None, **given) -> CheckOptions:
    """Validate the options of a check of ``kind`` (a :class:`~specdec_check.checker.core.kind.Kind`) through the
    option table (:mod:`specdec_check._options`): each validator raises ``ValueError`` (or ``TypeError`` for a wrong
    kind of object) naming the option, the value given and what is allowed. ``checks`` must be among the kind's
    checks under the rule (default: the rule's default checks); a ``device`` with ``{worker}`` in it is a template
    (validated with worker 0)."""
    table = {o.name: o for o in api_options(kind.option_kind) if o.name in FIELDS}
    unknown = sorted(set(given) - set(table))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for the {kind.name.replace('_', ' ')} kind; it takes "
                        f"{', '.join(table)}.")
    values = {name: given.get(name, option.default) for name, option in table.items()}
    values.setdefault("rule", RULES[0])
    for name, option in table.items():
        validate = option.validator()
        if validate is not None:
            values[name] = validate(values[name], kind=kind.option_kind, values=values)
    values["checks"] = _checks(kind, values["checks"], values["rule"])
    return CheckOptions(mode=kind.scaled_mode(values["mode"]), backend=values["backend"], seed=values["seed"], alpha=values["alpha"],
                        checks=values["checks"], progress=values["progress"], strict=values["strict"],
                        sampler_name=values["name"], scenarios_source=scenarios_source, monitor=values["monitor"],
                        rule=values["rule"], executor=values["executor"],
                        device_template=values.get("device_template"))


def _checks(kind, checks, rule) -> tuple:
    known = kind.allowed_checks(rule)
    if checks is None:
        return tuple(kind.default_checks(rule))
    checks = (checks,) if isinstance(checks, str) else tuple(checks)
    unknown = [c for c in checks if c not in known]
    if unknown:
        under = f" under rule={rule!r}" if rule != RULES[0] else ""
        raise ValueError(f"unknown check(s) {unknown}{under}; choose from {tuple(known)}.")
    return checks


# --------------------------------------------------------------------------- validators the option table names

def backend_option(value, *, values, **_):
    """The backend named ``value`` on ``values["device"]`` (a ``{worker}`` template is validated with worker 0,
    and kept in ``values["device_template"]``) in ``values["dtype"]``."""
    device, values["device_template"] = device_of_template(values.get("device"))
    return make_backend(value, device=device, dtype=values.get("dtype"))


def monitor_option(value, **_):
    if value is not None and not all(callable(getattr(value, m, None)) for m in MONITOR_METHODS):
        raise TypeError(f"monitor must be None or an object with the methods {', '.join(MONITOR_METHODS)}.")
    return value


def executor_option(value, **_):
    return check_executor(value)
