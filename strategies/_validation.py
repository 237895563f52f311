"""Argument checks for the strategies; every failure is an ``InvalidArgument`` that says how to fix the call."""

from __future__ import annotations

from hypothesis.errors import InvalidArgument

__all__ = ["check_argument", "check_bool", "check_int", "order_check"]


def check_argument(condition, fail_message: str, *f_args, **f_kwargs) -> None:
    """Raise ``InvalidArgument(fail_message.format(...))`` unless ``condition`` holds."""
    if not condition:
        raise InvalidArgument(fail_message.format(*f_args, **f_kwargs))


def check_int(value, name: str, *, floor: int | None = None, allow_none: bool = False) -> None:
    """``value`` must be an int (not a bool) at least ``floor``; ``None`` only when ``allow_none``."""
    if value is None and allow_none:
        return
    check_argument(
        isinstance(value, int) and not isinstance(value, bool),
        "{name} must be an int{none}, but got {value!r} of type {kind}. Pass e.g. {name}={example}.",
        name=name, none=" or None" if allow_none else "", value=value, kind=type(value).__name__,
        example=floor if floor is not None else 1,
    )
    if floor is not None:
        check_argument(value >= floor, "{name}={value} must be at least {floor}.", name=name, value=value, floor=floor)


def check_bool(value, name: str) -> None:
    check_argument(isinstance(value, bool), "{name} must be True or False, but got {value!r}.", name=name, value=value)


def order_check(name: str, floor: int, min_: int, max_: int) -> None:
    """``floor <= min_<name> <= max_<name>``, else a message naming both bounds."""
    check_argument(min_ >= floor, "min_{name}={min_} must be at least {floor}.", name=name, min_=min_, floor=floor)
    check_argument(
        min_ <= max_,
        "min_{name}={min_} is larger than max_{name}={max_}; raise max_{name} or lower min_{name}.",
        name=name, min_=min_, max_=max_,
    )
