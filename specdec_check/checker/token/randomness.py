"""Independence of a token sampler's outputs: identical inputs, fresh generators across calls, and pairs of
outputs drawn from the same row within a call.

Each pairing gets two tests (half its alpha share each): the exact one-sided Poisson-binomial count of
identical pairs (pair ``i`` collides with probability ``sum_t law[r_i, t]^2`` under independence: shared
noise makes it too high), and the two-sided identity test of the pairs' joint randomized PIT on a 4 x 4 grid
(:func:`~specdec_check.checker.checks.randomness.pair_pit_verdict`: antithetic or stratified uniforms make
it too low as well as too high).
"""

from __future__ import annotations

import numpy as np

from ..checks.base import Check
from ..checks.randomness import MAX_PAIRS, MIN_PAIRS, collision_verdict, independence_tests, pair_pit_verdict
from .caller import TokenDraw

__all__ = ["TokenIndependence"]

#: Tests on one set of pairs: the collision count and the joint PIT of the tokens.
TESTS_PER_PAIRING = 2


class TokenIndependence(Check):
    """See the module docstring."""

    power = "exact Poisson-binomial collision counts and a two-sided joint-PIT identity test, 200 to 4000 pairs each"

    @classmethod
    def plan(cls, scenario, options) -> list:
        return independence_tests(scenario) if "independence" in options.checks else []

    def finish(self) -> None:
        ctx = self.ctx
        if ctx.stopped:
            return
        laws = self.caller.laws
        determined = np.flatnonzero(~laws.ambiguous)
        if determined.size == 0:
            return
        pairs = max(MIN_PAIRS, min(ctx.mode.max_samples // 8, MAX_PAIRS))
        below = np.cumsum(laws.law, axis=1) - laws.law
        collision = (laws.law ** 2).sum(axis=1)  # P(two independent draws of a row agree)
        for name, within in (("independence_calls", False), ("independence_rows", True)):
            if name not in ctx.planned or ctx.stopped:
                continue
            rows = determined[ctx.rng.integers(0, determined.size, size=pairs)]
            if within:
                out = self.caller.call_host(TokenDraw(np.repeat(rows, 2)), ctx.next_seed(), "independence")
                if out is None:
                    return
                first, second = out[0::2, 0], out[1::2, 0]
                label = "outputs of one call drawn from the same row"
            else:
                draw = TokenDraw(rows)
                a = self.caller.call_host(draw, ctx.next_seed(), "independence")
                b = self.caller.call_host(draw, ctx.next_seed(), "independence") if a is not None else None
                if b is None:
                    return
                first, second = a[:, 0], b[:, 0]
                label = "calls with fresh generators on identical inputs"
            if not (laws.support[rows, first].all() and laws.support[rows, second].all()):
                continue  # an impossible output: the law check's finding, not this test's
            alpha = ctx.spend(name) / TESTS_PER_PAIRING
            collision_verdict(ctx, "independence", label, int((first == second).sum()), collision[rows], alpha)
            if ctx.stopped:
                return
            rng = np.random.default_rng(ctx.rng.integers(2**63))
            u = [below[rows, t] + rng.random(rows.size) * laws.law[rows, t] for t in (first, second)]
            pair_pit_verdict(ctx, "token", label, *(np.clip(x, 0.0, 1.0 - 1e-16) for x in u), alpha)
