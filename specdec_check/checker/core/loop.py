"""The one scenario loop, for every sampler kind: start -> blocks -> call -> step -> absorb -> finish -> classify.

:func:`run_scenario` runs one :class:`~specdec_check.checker.core.context.ScenarioPlan` (a whole
scenario, or one block range of its law loop) with the kind's hooks
(:class:`~specdec_check.checker.core.kind.Kind`):

1. the kind's checks are built (a later shard of a split scenario builds only the checks whose
   evidence merges, ``merged = True``) and started in order (a check may call the sampler there:
   probes); a scenario stopped by a finding starts no more checks;
2. the law loop: the kind feeds blocks of inputs, each served to one or more calls through the guarded
   call (:mod:`.guard`); the outputs become one step every check absorbs; a finding that stops the
   scenario, a check that refuses the step, or a sequential test that rejected ends the loop;
3. the checks finish in order (``Classify`` among them turns rejected tests into findings) and the kind
   summarises. A shard of a split scenario instead hands its merged checks' evidence to the driver, and
   :func:`conclude` finishes the scenario on the merged evidence as a whole run would, with the first
   shard's other findings and records where a whole run puts them.
"""

from __future__ import annotations

import time

from ...scenarios._memory import release_mappings, reusing_mappings
from .parts import PartEvidence, shard_calls
from .tally import shipped

__all__ = ["conclude", "run_scenario"]


def _split(ctx, kind, calls: int, reuse: int) -> int:
    """This shard's calls of a law loop of ``calls`` calls (all of them for a scenario run whole)."""
    if not kind.splittable:
        return calls
    per_part = shard_calls(ctx.scenario.rows_per_call, reuse, ctx.mode.shard_rows)
    ctx.parts = max(1, -(-calls // per_part))
    return calls if ctx.parts == 1 else min(per_part, calls - ctx.part * per_part)


def law_loop(kind, ctx, caller, counts, checks, calls: int, reuse: int) -> None:
    """Feed blocks, call on each of their windows, and hand each block's step to every check."""
    feed = kind.feed(ctx, caller, calls, reuse)
    try:
        for block, windows in feed:
            outputs = []
            with ctx.seed_batch(len(windows)) as seeds:
                for window in windows:
                    out, parsed = caller.call(window, seeds.next())
                    if out is None:
                        break
                    outputs.append((out, parsed))
            if len(outputs) < len(windows):
                break
            ctx.samples += sum(int(out.shape[0]) for out, _ in outputs)
            step = kind.step(ctx, caller, counts, block, outputs)
            if step is None:
                break
            if not all(check.absorb(step) for check in checks) or any(check.rejected_early for check in checks):
                break
            block = windows = window = outputs = step = None  # this block's arrays go before the feed draws the next
    finally:
        feed.close()  # a kind's feed may check its last block's inputs when it is closed


def run_scenario(kind, ctx, sampler) -> None:
    """Run ``ctx``'s plan (see the module docstring); ``ctx`` then holds the outcome (and, for a shard of
    a split scenario, ``ctx.evidence``: what the driver merges). The input mappings kept for reuse during the
    run are unmapped when it ends (:func:`~specdec_check.scenarios._memory.reusing_mappings`)."""
    with reusing_mappings():
        _run_scenario(kind, ctx, sampler)


def _run_scenario(kind, ctx, sampler) -> None:
    started = time.perf_counter()
    ctx.evidence = None
    counts = kind.counts(ctx)
    reason = kind.skip_reason(ctx.scenario)
    if reason is not None:
        ctx.recorder.skipped("scenario", reason)
        ctx.summary = kind.summary(ctx, counts, 0.0)
        return
    caller = kind.caller(ctx, sampler)
    # (position in the kind's order, check): a later shard builds the merged checks only
    built = [(i, cls(ctx, caller, counts)) for i, cls in enumerate(kind.check_classes(ctx))
             if not ctx.part or cls.merged]
    checks = [check for _, check in built]
    for check in checks:
        if not ctx.stopped:
            check.start()
            release_mappings()  # a probe's mappings do not stay beside the next probe's arrays (see below)
    calls, reuse = kind.law_budget(ctx, checks)
    law_loop(kind, ctx, caller, counts, checks, _split(ctx, kind, calls, reuse), reuse)
    # Kept mappings serve the next draws of one phase (the law loop, a check's calls): between phases they are
    # unmapped (here and after each check that finishes), so that those a phase no longer draws do not stay resident beside the next one's arrays and
    # statistics (the default battery's peak: 77 MiB of the law loop's mappings beside the pairs' calls).
    release_mappings()
    if ctx.parts == 1:
        for check in checks:
            check.finish()
            release_mappings()
        ctx.summary = kind.summary(ctx, counts, time.perf_counter() - started)
        return
    deferred = {}
    for i, check in built:  # the first shard's other checks finish now; the merged ones after the merge
        if not check.merged:
            mark = ctx.recorder.mark()
            check.finish()
            release_mappings()
            deferred[i] = ctx.recorder.since(mark)
    tallies = {i: check.evidence() for i, check in built if check.merged}
    ctx.evidence = PartEvidence(tallies if not ctx.part else shipped(tallies), counts,
                                time.perf_counter() - started, deferred)


def conclude(kind, ctx) -> None:
    """After a split scenario's last merged shard: every check finishes in its order, the merged ones on
    the merged evidence, the others with the findings and records they made in the first shard."""
    evidence, ctx.evidence = ctx.evidence, None
    recorder = ctx.recorder
    for i, cls in enumerate(kind.check_classes(ctx)):
        if cls.merged:
            check = cls(ctx, None, evidence.counts)
            check.adopt(evidence.tallies[i])
            check.finish()
        else:
            findings, records = evidence.deferred.get(i, ((), ()))
            recorder.findings += findings
            recorder.records += records
    ctx.summary = kind.summary(ctx, evidence.counts, evidence.elapsed)
