"""The protocol every check follows, and the ``Classify`` step that turns rejected tests into findings."""

from __future__ import annotations

__all__ = ["Check", "Classify"]


class Check:
    """One concern of a scenario run (see :mod:`specdec_check.checker.checks`).

    A check is built for one scenario's run ``ctx`` with the kind's caller and step counts; ``plan``
    (a class method) lists the statistical tests it will run on a scenario, so the run's alpha ledger
    is sized before anything runs; ``start`` runs before the law loop (a probe may call the sampler
    there), ``absorb(step)`` takes each block's step (False ends the loop), ``finish`` records its
    results after the loop. A check whose evidence is merged over a split scenario's shards sets
    ``merged`` and implements ``evidence`` / ``adopt``; it then finishes after the merge, on the merged
    evidence. Subclasses set ``power`` (what the check can detect, with how many samples).
    """

    power: str = ""
    #: Whether the check's evidence merges over a split scenario's shards (it then runs in every shard
    #: and finishes after the merge); the others run in the first shard only.
    merged: bool = False

    def __init__(self, ctx, caller, counts):
        self.ctx, self.caller, self.counts = ctx, caller, counts

    @classmethod
    def plan(cls, scenario, options) -> list:
        """The :class:`~specdec_check.checker.core.kind.PlannedTest` s this check runs on ``scenario``
        under ``options`` (the selected check names ``options.checks``, the rule ``options.rule``);
        each spends one alpha share."""
        return []

    def start(self) -> None:
        """Before the law loop (a probe may call the sampler here)."""

    def absorb(self, step) -> bool:
        """One block's step; False ends the scenario's law loop (after a finding)."""
        return True

    @property
    def rejected_early(self) -> bool:
        """Whether a sequential test has already rejected (the law loop stops)."""
        return False

    def evidence(self):
        """What this shard's run of a merged check hands the driver (its tallies)."""
        return None

    def adopt(self, evidence) -> None:
        """Take the evidence merged over a scenario's shards (then :meth:`finish` records it)."""

    def finish(self) -> None:
        """After the law loop: record results (may call the sampler, e.g. randomness checks)."""


class Classify(Check):
    """Where, among a kind's checks, the rejected tests recorded so far become findings
    (``kind.classify``): after the law tests, before or after the randomness checks as the kind orders."""

    merged = True

    def finish(self) -> None:
        self.ctx.kind.classify(self.ctx, self.counts)
