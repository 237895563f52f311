"""The protocol every check follows."""

from __future__ import annotations

__all__ = ["Check"]


class Check:
    """One concern of a scenario run (see :mod:`specdec_check.checker.checks`).

    Subclasses set ``power`` (what the check can detect, with how many samples) and implement
    the hooks they need; the defaults do nothing.
    """

    power: str = ""

    @classmethod
    def plan(cls, scenario, options) -> list:
        """The :class:`~specdec_check.checker._kinds.PlannedTest` s this check runs on ``scenario``
        under ``options`` (the selected check names ``options.checks``, the rule ``options.rule``);
        each spends one alpha share."""
        return []

    def start(self) -> None:
        """Before the call loop (a probe may call the sampler here)."""

    def absorb(self, step) -> bool:
        """One call's located step; False ends the scenario (after a finding)."""
        return True

    @property
    def rejected_early(self) -> bool:
        """Whether a sequential test has already rejected (the call loop stops)."""
        return False

    def finish(self) -> None:
        """After the call loop: record results (may call the sampler, e.g. randomness checks)."""
