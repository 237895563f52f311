"""What every ``check_*`` function does with its keywords: validate them through the option table, then run."""

from __future__ import annotations

from .options import FIELDS, check_options
from .session import run

__all__ = ["run_check"]


def run_check(kind, sampler, keywords: dict):
    """Check ``sampler`` of ``kind`` with a ``check_*`` call's ``keywords`` (its options, by the option table's
    names; ``scenarios`` among them); returns the :class:`~specdec_check.checker.core.report.CheckReport`."""
    scenarios = keywords.get("scenarios")
    options = check_options(kind, **{name: value for name, value in keywords.items() if name in FIELDS})
    kind.validate(options)
    return run(kind, sampler, scenarios, options)
