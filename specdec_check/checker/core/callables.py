"""Validation of what a user hands to the checker, before anything runs."""

from __future__ import annotations

import inspect

__all__ = ["VERIFIER_KEYWORDS", "GENERATOR_KEYWORDS", "check_sampler", "qualified_name"]

VERIFIER_KEYWORDS = ("draft_token_ids", "draft_probs", "target_probs", "generator")
GENERATOR_KEYWORDS = ("target", "draft", "prompts", "max_new_tokens", "gamma", "generator")


def qualified_name(obj) -> str:
    """``module:name`` for ``obj``, preferring a public package that re-exports it over a private module.

    A ``functools.partial`` is named ``partial(module:func)`` and a callable instance
    ``module:Class()``: readable, though not importable (repro lines then say so).
    """
    import functools
    import sys

    if isinstance(obj, functools.partial):
        return f"partial({qualified_name(obj.func)})"
    if not hasattr(obj, "__qualname__") and not hasattr(obj, "__name__") and callable(obj):
        return f"{qualified_name(type(obj))}()"

    module = getattr(obj, "__module__", None) or type(obj).__module__
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    parts = module.split(".")
    while len(parts) > 1 and parts[-1].startswith("_"):
        parent = sys.modules.get(".".join(parts[:-1]))
        if parent is None or getattr(parent, name, None) is not obj:
            break
        parts = parts[:-1]
    return f"{'.'.join(parts)}:{name}"


def check_sampler(sampler, keywords, role: str) -> None:
    """Raise ``TypeError`` unless ``sampler`` is callable with every contract keyword."""
    if not callable(sampler):
        raise TypeError(f"the {role} must be callable; got {type(sampler).__name__} {sampler!r}.")
    try:
        signature = inspect.signature(sampler)
    except (TypeError, ValueError):
        return  # builtins / extension callables: nothing to inspect
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    accepted = {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    missing = [k for k in keywords if k not in accepted]
    if missing:
        raise TypeError(
            f"the {role} {qualified_name(sampler)} does not accept the contract keyword(s) {missing}; "
            f"it must be callable as {role}(*, {', '.join(keywords)}). Wrap it with an adapter "
            "(see specdec_check.adapters) if it uses another convention."
        )
