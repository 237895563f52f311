"""The one formatter of ``specdec-check`` command lines (repro lines of the checker, the CLI's
supervisor and the suite). Standard library only: the CLI's supervising process uses it.

Every word is shell-quoted (``shlex.join``), so a scenario named ``my scenario $(touch X)``
comes back as one argument and runs nothing; options appear only when they differ from the
defaults of the settings table.
"""

from __future__ import annotations

import shlex

from ._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_RULE

__all__ = ["command_line"]


def command_line(command: str, sampler: str, *, mode=None, tv=None, seed=None, scenarios=None, scenario=None,
                 alpha=None, checks=None, strict=False, rule=DEFAULT_RULE, backend=DEFAULT_BACKEND, device=None, dtype=None,
                 timeout=None) -> str:
    """``specdec-check COMMAND SAMPLER [options]``: the options given, in a fixed order, shell-quoted.
    ``command`` may carry the subcommand's own options (``"tree --drafting topk"``)."""
    words = ["specdec-check", *command.split(), sampler]
    if mode is not None:
        words += ["--mode", str(mode)]
    if tv is not None:
        words += ["--tv", repr(float(tv))]  # every digit: the plan (and so the draws) depends on it
    if seed is not None:
        words += ["--seed", str(seed)]
    if scenarios:
        words += ["--scenarios", str(scenarios)]
    if scenario is not None:
        words += ["--scenario", str(scenario)]
    if alpha is not None and float(alpha) != DEFAULT_ALPHA:
        words += ["--alpha", repr(float(alpha))]
    if checks:
        words += ["--checks", ",".join(checks)]
    if strict:
        words.append("--strict")
    if rule and rule != DEFAULT_RULE:
        words += ["--rule", str(rule)]
    if backend and backend != DEFAULT_BACKEND:
        words += ["--backend", str(backend)]
        if device is not None:
            words += ["--device", str(device)]
        if dtype is not None:
            words += ["--dtype", str(dtype)]
    if timeout is not None:
        words += ["--timeout", f"{timeout:g}" if isinstance(timeout, float) else str(timeout)]
    return shlex.join(words)
