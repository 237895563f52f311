"""Shards finer than a scenario: the evidence one block range of a scenario's law loop hands the
driver, and its merge in shard order (a kind's ``merge_part`` and ``concluded``).

A kind whose law loop plans more rows than the mode's ``shard_rows`` runs it as block ranges on
their own streams (:func:`part_seed`). Every range leaves a
:class:`PartEvidence`: the merged checks' tallies (the first range's whole, the later ranges' counts
only), the step counts, the seconds it ran. Counts add, and the first range's e-process, one mixture
on the cumulative counts, is looked at once more at each later range's boundary
(:meth:`~specdec_check.checker.core.tally.CountTally.merge`); the kind's ``conclude`` then records the
tests on the merged evidence as if the scenario had run whole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .context import ScenarioContext
from .tally import merge_evidence

__all__ = ["PartEvidence", "concluded", "merge_part", "part_seed", "parts_of", "shard_calls", "whole"]


@dataclass
class PartEvidence:
    """What one shard of a split scenario hands the driver: the merged checks' tallies (by the check's
    position in its kind's order), the step counts (an object with ``merge``), the seconds it ran, and the
    first shard's ``(findings, records)`` of each other check (by position), which the conclusion puts
    where a whole run would (:func:`specdec_check.checker.core.loop.conclude`). Picklable."""

    tallies: dict
    counts: object
    elapsed: float
    deferred: dict = field(default_factory=dict)


def part_seed(seed: np.random.SeedSequence, part: int) -> np.random.SeedSequence:
    """The stream of shard ``part`` of a scenario whose stream is ``seed``: the scenario's own for part 0
    (a scenario run whole draws what it always drew), its ``part``-th child (``SeedSequence.spawn``'s,
    made without mutating ``seed``) for the others. Fixed by the plan, so any executor replays it."""
    if part == 0:
        return seed
    return np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, int(part)), pool_size=seed.pool_size)


def shard_calls(rows_per_call: int, reuse: int, shard_rows: int) -> int:
    """Calls in one shard of a law loop: ``shard_rows`` rows, in whole calls and whole reused blocks."""
    calls = max(1, -(-shard_rows // rows_per_call))
    return -(-calls // reuse) * reuse


#: ``shard_rows`` of a mode whose law loops run whole: more rows than any mode plans.
WHOLE = 1 << 62


def whole(mode):
    """``mode`` with its law loops run whole (one shard): a diagnosis runs in one process, start to end."""
    return dataclasses.replace(mode, shard_rows=WHOLE)


def _rejected(evidence) -> bool:
    if isinstance(evidence, dict):
        return any(_rejected(value) for value in evidence.values())
    return evidence is not None and evidence.rejected_early


def concluded(ctx) -> bool:
    """Whether a split scenario needs no later shard: it stopped (a contract failure, an impossible event)
    or a merged e-process rejected (anytime-valid: the shards merged so far are the evidence)."""
    return bool(ctx.stopped or _rejected(ctx.evidence.tallies))


def merge_part(ctx, later) -> None:
    """Merge the next shard's outcome ``later`` (its evidence, findings, records, samples, calls) into the
    split scenario's first shard ``ctx``: counts add, the e-process looks at the boundary (shard order)."""
    mine, theirs = ctx.evidence, later.evidence
    ctx.evidence = PartEvidence(merge_evidence(mine.tallies, theirs.tallies), mine.counts.merge(theirs.counts),
                                mine.elapsed + theirs.elapsed, mine.deferred)
    recorder = ctx.recorder
    recorder.findings += list(later.findings)
    recorder.records += list(later.records)
    ctx.samples += later.samples
    ctx.calls += later.calls
    if later.stopped:
        recorder.stop()


def parts_of(kind, plan, ledger) -> int:
    """How many shards ``plan``'s scenario runs in (fixed by the plan, whatever runs them)."""
    if not kind.splittable:
        return 1
    return int(kind.law_plan(ScenarioContext(kind, plan, ledger, None))[1])
