"""Randomness checks shared by every verifier kind: determinism under a fixed generator state, and the
exact collision test behind each kind's independence check."""

from __future__ import annotations

import numpy as np

from ... import stats
from ..core.kind import PlannedTest
from ..core.report import TestRecord
from .base import Check

__all__ = ["Determinism", "MAX_PAIRS", "MIN_CALLS", "MIN_PAIRS", "RANDOMNESS_ROWS", "RANDOMNESS_SHARE", "independence_tests",
           "collision_verdict"]

#: Rows per call in the determinism and independence checks: pairs, not power, are what they need,
#: and 4096 rows give 2048 within-call pairs per call at a cost independent of rows_per_call.
RANDOMNESS_ROWS = 4096
#: Collision pairs per test: at least 200 (a shared uniform collides on most pairs, so 200 pairs
#: reject at any alpha above 1e-30), at most 4000 (power against partial sharing saturates).
MIN_PAIRS, MAX_PAIRS = 200, 4000
#: The randomness checks spend at most 1/RANDOMNESS_SHARE of the mode's calls and cells each (the law
#: tests get the rest), and at least MIN_CALLS calls (pairs need two calls, a few pairs of pairs).
RANDOMNESS_SHARE = 4
MIN_CALLS = 4


class Determinism(Check):
    """Two calls with the same generator state on the same inputs must give the same output.

    The kind's caller supplies the inputs (``replay_draw``), how many rows they hold (``rows_of``) and how
    a differing row is named (``replay_difference``)."""

    power = "exact replay of one call of at most 4096 rows (no alpha spent)"

    def finish(self) -> None:
        ctx, caller = self.ctx, self.caller
        if ctx.stopped or not ctx.selected("determinism"):
            return
        draw = caller.replay_draw()
        seed = ctx.next_seed()
        first = caller.call_host(draw, seed, "determinism")
        second = caller.call_host(draw, seed, "determinism") if first is not None else None
        if first is None or second is None:
            return  # the call failed: that finding is the contract's, and nothing was replayed
        same = bool(np.array_equal(first, second))
        ctx.recorder.record(TestRecord(ctx.scenario.name, "determinism", "exact replay", same, 0.0,
                                       caller.rows_of(draw)))
        if not same:
            row = int(np.flatnonzero((first != second).any(axis=1))[0])
            message, evidence = caller.replay_difference(row, first[row].tolist(), second[row].tolist())
            ctx.recorder.failure("determinism", message, evidence)


#: What a rejected collision test says about its cause.
SHARED = "; the randomness is shared or does not come from the generator"


def collision_verdict(ctx, check, label, hits, probs, alpha, *, extra: str = SHARED, evidence=None) -> bool:
    """Exact one-sided Poisson-binomial test of ``hits`` identical pairs (pair ``i`` collides with probability
    ``probs[i]`` under independence); record it, fail when rejected (``extra`` and ``evidence`` add to the
    finding). Returns whether it rejected."""
    s = ctx.scenario
    probs = np.clip(probs, 0.0, 1.0)
    res = stats.poisson_binomial_test(hits, probs, alpha=alpha, alternative="greater")
    ctx.recorder.record(TestRecord(
        s.name, check, f"exact Poisson-binomial collision count ({label})", not res.rejected, alpha,
        int(probs.size), statistic=float(hits), pvalue=float(res.pvalue),
        details={"collisions": hits, "expected": float(probs.sum()), "pairs": int(probs.size)},
    ))
    if res.rejected:
        ctx.recorder.failure(check, f"identical inputs gave identical outputs too often across {label}: {hits} of "
                             f"{probs.size} pairs vs {probs.sum():.3g} expected under independence (p = "
                             f"{res.pvalue:.3g}){extra}",
                             {"collisions": hits, "pairs": int(probs.size), "expected": float(probs.sum()),
                              "pvalue": float(res.pvalue), **(evidence or {})})
    return bool(res.rejected)


def independence_tests(scenario) -> list:
    """The planned collision tests of an independence check: across calls, and across the rows of a call
    where a call has two or more rows."""
    tests = [PlannedTest("independence_calls", "independence")]
    if scenario.rows_per_call >= 2:
        tests.append(PlannedTest("independence_rows", "independence"))
    return tests
