"""Randomness of a ragged verifier: determinism, and independence across calls and across requests.

Determinism: two calls with the same generator state on the same inputs give the same output.
Independence: identical inputs and fresh generators give identical outputs for a random request
with probability ``sum_o P(o)^2`` (its chain block's collision probability), so the number of
identical pairs is exactly Poisson-binomial; across calls (the same call twice) and across
requests of one call (each random request twice, side by side). Greedy requests are
deterministic by contract and are left out.
"""

from __future__ import annotations

import numpy as np

from .._kinds import PlannedTest
from .._report import TestRecord
from .._ragged_block import RaggedBlock, duplicate_requests
from ._base import Check
from ._randomness import MAX_PAIRS, MIN_CALLS, MIN_PAIRS, RANDOMNESS_SHARE
from ._ragged_laws import ragged_calls_budget
from ... import stats

__all__ = ["RaggedDeterminism", "RaggedIndependence"]


class RaggedDeterminism(Check):
    """The same call twice with the same generator state: identical outputs."""

    power = "exact replay of one call (no alpha spent)"

    def __init__(self, run, caller, counts):
        self.run, self.caller = run, caller

    def finish(self) -> None:
        run, caller, s = self.run, self.caller, self.run.scenario
        if run.stopped or not run.selected("determinism"):
            return
        draw = caller.reused_draw()
        seed = run.next_seed()
        first = caller.call(draw, seed, "determinism")[0]
        second = caller.call(draw, seed, "determinism")[0] if first is not None else None
        if first is None or second is None:
            return
        same = bool(np.array_equal(first, second))
        run.record(TestRecord(s.name, "determinism", "exact replay", same, 0.0, s.num_requests))
        if not same:
            i = int(np.flatnonzero((first != second).any(axis=1))[0])
            run.fail("determinism", f"{s.describe_request(i)}: two calls with the same generator state on the same "
                     f"inputs gave {first[i].tolist()} and {second[i].tolist()}: the verifier uses randomness other "
                     "than its generator", {"request": i, "first": first[i].tolist(), "second": second[i].tolist()})


def _collision_probs(block, bonus_missing: bool) -> np.ndarray:
    """Collision probability of each random request of ``block`` (NaN for greedy requests)."""
    probs = np.full(block.draw.layout.batch, np.nan)
    for group in block.groups:
        probs[group.requests] = group.block.collision_probs(bonus_missing=bonus_missing)
    return probs


class RaggedIndependence(Check):
    """Collision counts of random requests: the same call with fresh generators, and each random
    request twice in one call."""

    power = "exact one-sided Poisson-binomial collision counts over 200 to 4000 pairs"

    @classmethod
    def plan(cls, scenario, options) -> list:
        if "independence" not in options.checks or not len(scenario.random_requests):
            return []
        return [PlannedTest("independence_calls", "independence"),
                PlannedTest("independence_requests", "independence")]

    def __init__(self, run, caller, counts):
        self.run, self.caller, self.counts = run, caller, counts

    def finish(self) -> None:
        run = self.run
        if "independence_calls" not in run.planned:
            return
        pairs = max(MIN_PAIRS, min(run.mode.max_samples // 8, MAX_PAIRS))
        max_calls = max(MIN_CALLS, ragged_calls_budget(run) // RANDOMNESS_SHARE)
        for name, within in (("independence_calls", False), ("independence_requests", True)):
            if name in run.planned and not run.stopped:
                self.collisions(name, pairs, max_calls, within=within)

    def collisions(self, name, pairs, max_calls, *, within):
        run, caller, s = self.run, self.caller, self.run.scenario
        alpha = run.spend(name)
        label = "random requests within a call" if within else "calls with fresh generators"
        hits, probs, calls = 0, [], 0
        per_hits, per_expected = np.zeros(s.num_requests), np.zeros(s.num_requests)
        missing = bool(self.counts.bonus_missing)
        randoms = s.random_requests
        while calls < max_calls and sum(p.size for p in probs) < pairs:
            draw = caller.reused_draw()
            if within:
                draw = duplicate_requests(draw, randoms)
                out = caller.call(draw, run.next_seed(), "independence")[0]
                calls += 1
                if out is None:
                    return
                same = np.all(out[0::2] == out[1::2], axis=1)
                p = _collision_probs(RaggedBlock(draw), missing)[0::2]
            else:
                first = caller.call(draw, run.next_seed(), "independence")[0]
                second = caller.call(draw, run.next_seed(), "independence")[0] if first is not None else None
                calls += 2
                if second is None:
                    return
                same = np.all(first == second, axis=1)[randoms]
                p = _collision_probs(RaggedBlock(draw), missing)[randoms]
            probs.append(p)
            per_hits[randoms] += same
            per_expected[randoms] += p
            hits += int(same.sum())
        probs = np.clip(np.concatenate(probs), 0.0, 1.0)
        res = stats.poisson_binomial_test(hits, probs, alpha=alpha, alternative="greater")
        run.record(TestRecord(s.name, "independence", f"exact Poisson-binomial collision count ({label})",
                              not res.rejected, alpha, int(probs.size), statistic=float(hits), pvalue=float(res.pvalue),
                              details={"collisions": hits, "expected": float(probs.sum()), "pairs": int(probs.size)}))
        if res.rejected:
            worst = int(np.argmax(per_hits - per_expected))
            run.fail("independence", f"identical inputs gave identical outputs too often across {label}: {hits} of "
                     f"{probs.size} pairs vs {probs.sum():.3g} expected under independence (p = {res.pvalue:.3g}); most "
                     f"collisions: {s.describe_request(worst)} ({int(per_hits[worst])} vs {per_expected[worst]:.3g} "
                     "expected); the randomness is shared or does not come from the generator, or the output law itself is wrong "
                     "(see the law checks)",
                     {"collisions": hits, "pairs": int(probs.size), "expected": float(probs.sum()),
                      "pvalue": float(res.pvalue), "request": worst, "request_collisions": int(per_hits[worst]),
                      "request_expected": float(per_expected[worst])})
