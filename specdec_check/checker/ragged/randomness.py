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

from ..checks.base import Check
from ..checks.randomness import MAX_PAIRS, MIN_CALLS, MIN_PAIRS, RANDOMNESS_SHARE, collision_verdict
from ..core.kind import PlannedTest
from .block import RaggedBlock, duplicate_requests
from .laws import ragged_calls_budget

__all__ = ["RaggedIndependence"]


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

    def finish(self) -> None:
        ctx = self.ctx
        if "independence_calls" not in ctx.planned:
            return
        pairs = max(MIN_PAIRS, min(ctx.mode.max_samples // 8, MAX_PAIRS))
        max_calls = max(MIN_CALLS, ragged_calls_budget(ctx) // RANDOMNESS_SHARE)
        for name, within in (("independence_calls", False), ("independence_requests", True)):
            if name in ctx.planned and not ctx.stopped:
                self.collisions(name, pairs, max_calls, within=within)

    def collisions(self, name, pairs, max_calls, *, within):
        ctx, caller, s = self.ctx, self.caller, self.ctx.scenario
        alpha = ctx.spend(name)
        label = "random requests within a call" if within else "calls with fresh generators"
        hits, probs, calls = 0, [], 0
        per_hits, per_expected = np.zeros(s.num_requests), np.zeros(s.num_requests)
        missing = bool(self.counts.bonus_missing)
        randoms = s.random_requests
        while calls < max_calls and sum(p.size for p in probs) < pairs:
            draw = caller.reused_draw()
            if within:
                draw = duplicate_requests(draw, randoms)
                out = caller.call_host(draw, ctx.next_seed(), "independence")
                calls += 1
                if out is None:
                    return
                same = np.all(out[0::2] == out[1::2], axis=1)
                p = _collision_probs(RaggedBlock(draw), missing)[0::2]
            else:
                first = caller.call_host(draw, ctx.next_seed(), "independence")
                second = caller.call_host(draw, ctx.next_seed(), "independence") if first is not None else None
                calls += 2
                if second is None:
                    return
                same = np.all(first == second, axis=1)[randoms]
                p = _collision_probs(RaggedBlock(draw), missing)[randoms]
            probs.append(p)
            per_hits[randoms] += same
            per_expected[randoms] += p
            hits += int(same.sum())
        probs = np.concatenate(probs)
        worst = int(np.argmax(per_hits - per_expected))
        collision_verdict(ctx, "independence", label, hits, probs, alpha,
                          extra=f"; most collisions: {s.describe_request(worst)} ({int(per_hits[worst])} vs "
                                f"{per_expected[worst]:.3g} expected); the randomness is shared or does not come from "
                                "the generator, or the output law itself is wrong (see the law checks)",
                          evidence={"request": worst, "request_collisions": int(per_hits[worst]),
                                    "request_expected": float(per_expected[worst])})
