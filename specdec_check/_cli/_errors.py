"""The command line's errors: a usage error is one line and exit status 2."""

from __future__ import annotations

import argparse

from .._settings import CallableNotFound
from .._settings import resolve_callable as _resolve

__all__ = ["EXIT_FAILED", "EXIT_INTERNAL", "EXIT_PASSED", "EXIT_USAGE", "PROG", "Parser", "ParseError", "UsageError",
           "resolve_callable"]

PROG = "specdec-check"
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A mistake on the command line: reported on one line, exit status 2."""


class ParseError(UsageError):
    """An error found by argparse (gets a ``--help`` hint)."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) raised as :class:`UsageError`."""

    def error(self, message):
        raise ParseError(message)


def resolve_callable(path: str, *, what: str = "object", require_callable: bool = False):
    """Import ``module:attr`` (or ``module.attr``) and return it; :class:`UsageError` otherwise
    (:func:`specdec_check._settings.resolve_callable` with the command line's error type)."""
    try:
        return _resolve(path, what=what, require_callable=require_callable)
    except CallableNotFound as exc:
        raise UsageError(str(exc)) from None
