"""The one formatter of repro lines: the command that reruns a finding's scenario.

A run is reproducible from the command line when its sampler and its scenarios have
``MODULE:ATTR`` names; the line is then shell-quoted word by word (``shlex.join``) and
carries every option that changes what runs (``--scenarios``, ``--alpha``, ``--checks``,
``--strict``, the backend). Otherwise (scenario objects built in Python, a closure) the
repro is the Python call to make, with what the user must supply named in angle brackets.
"""

from __future__ import annotations

from ..._command_line import command_line
from ..._settings import DEFAULT_ALPHA, target_tv

__all__ = ["repro_command"]


def repro_command(kind, options, scenario: str) -> str:
    """The command that reruns ``scenario`` of a run of ``kind`` under ``options`` with the same seed."""
    backend = options.backend
    try:
        tv, expressible = target_tv(options.mode), True
    except ValueError:  # a Mode built by hand: only the Python call carries it
        tv, expressible = None, False
    partial = tuple(options.checks) != tuple(kind.default_checks(options.rule))
    if kind.has_command and options.sampler_name is not None and options.scenarios_source is not False and expressible:
        return command_line(kind.command, options.sampler_name, mode=options.mode.name, tv=tv, seed=options.seed,
                            scenarios=options.scenarios_source or None, scenario=scenario, alpha=options.alpha,
                            checks=options.checks if partial else None, strict=options.strict, rule=options.rule,
                            backend=backend.name, device=backend.device, dtype=backend.dtype)
    sampler = options.sampler_name or "<your sampler>"
    if not expressible:
        mode = repr(options.mode)
    else:
        mode = f"{options.mode.name!r}" if tv is None else f"mode_for_tv({tv!r}, {options.mode.name!r})"
    arguments = [*kind.repro_keywords(), f"scenarios=[<the scenario {scenario!r}>]", f"mode={mode}",
                 f"seed={options.seed}"]
    if options.alpha != DEFAULT_ALPHA:
        arguments.append(f"alpha={options.alpha!r}")
    if partial:
        arguments.append(f"checks={list(options.checks)!r}")
    if options.strict:
        arguments.append("strict=True")
    if options.rule != "standard":
        arguments.append(f"rule={options.rule!r}")
    if backend.name != "numpy":
        arguments.append(f"backend={backend.name!r}, device={backend.device!r}, dtype={backend.dtype!r}")
    return f"{kind.api_function}({sampler}, {', '.join(arguments)})"
