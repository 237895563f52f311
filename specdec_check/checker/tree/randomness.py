"""Randomness of a tree verifier: independence across calls and across the rows of a call (exact collision
counts, as for chains; determinism is :class:`specdec_check.checker.checks.randomness.Determinism`)."""

from __future__ import annotations

import numpy as np

from ..checks.base import Check
from ..checks.randomness import MAX_PAIRS, MIN_CALLS, MIN_PAIRS, RANDOMNESS_ROWS, RANDOMNESS_SHARE, collision_verdict, \
    independence_tests
from .block import collision_probs
from .caller import POOL_CELLS
from .laws import tree_cells_per_call

__all__ = ["TreeIndependence"]

#: Probability cells of tree laws one collision test builds at most (32 MiB of float64): the pairs it
#: needs shrink with the tree and the vocabulary, down to MIN_PAIRS (200 pairs already reject a shared
#: uniform, which collides on most pairs, at any alpha above 1e-30).
RANDOMNESS_CELLS = 1 << 22


class TreeIndependence(Check):
    """Identical trees, fresh generators: outputs collide with probability ``sum_o P(o)^2`` per pair, so the
    number of identical pairs is exactly Poisson-binomial, across calls and across the rows of one call."""

    power = "exact one-sided Poisson-binomial collision counts over 200 to 4000 pairs"

    @classmethod
    def plan(cls, scenario, options) -> list:
        return independence_tests(scenario) if "independence" in options.checks else []

    def finish(self) -> None:
        ctx = self.ctx
        s = ctx.scenario
        self.cells_per_call = tree_cells_per_call(s)
        if ctx.recorder.failed():  # the expected collisions assume the exact law
            for name in ("independence_calls", "independence_rows"):
                if name in ctx.planned and not ctx.stopped:
                    ctx.recorder.skipped("independence", f"{name}: the scenario already failed; the expected "
                                         "collision counts assume the exact law")
            return
        cap = RANDOMNESS_CELLS // ((s.nodes + 1) * s.vocab_size)
        pairs = max(MIN_PAIRS, min(ctx.mode.max_samples // 8, MAX_PAIRS, cap))
        for name, within in (("independence_calls", False), ("independence_rows", True)):
            if name in ctx.planned and not ctx.stopped:
                self.collisions(name, pairs, within_call=within)

    def collisions(self, name, pairs, *, within_call):
        ctx, caller, s = self.ctx, self.caller, self.ctx.scenario
        label = "rows within a call" if within_call else "calls with fresh generators"
        alpha = ctx.spend(name)
        max_calls = max(MIN_CALLS, min(ctx.mode.max_calls // RANDOMNESS_SHARE,
                                       int(ctx.mode.max_cells // (RANDOMNESS_SHARE * self.cells_per_call))))
        # Calls of several scenario calls' rows (the contract allows any batch): pairs, not the call shape,
        # are what these tests need, and the laws of a large draw cost less per row than of many small ones.
        per_call = max(1, min(RANDOMNESS_ROWS, POOL_CELLS // ((s.nodes + 1) * s.vocab_size)) // s.rows_per_call)
        rows = per_call * s.rows_per_call
        half = max(1, rows // 2)
        hits, probs, calls = 0, [], 0
        while sum(p.size for p in probs) < pairs and calls < max_calls:
            if within_call:
                draw = caller.draw(calls=-(-half // s.rows_per_call)).head(half)
                block = caller.block(draw.head(np.repeat(np.arange(half), 2)))
                out = caller.call(block, ctx.next_seed(), "independence")[0]
                calls += 1
                if out is None:
                    return
                same = np.all(out[0::2] == out[1::2], axis=1)
                probs.append(collision_probs(block)[0::2])
            else:
                block = caller.block(caller.draw(calls=per_call))
                first = caller.call(block, ctx.next_seed(), "independence")[0]
                second = caller.call(block, ctx.next_seed(), "independence")[0] if first is not None else None
                calls += 2
                if second is None:
                    return
                same = np.all(first == second, axis=1)
                probs.append(collision_probs(block))
            hits += int(same.sum())
        collision_verdict(ctx, "independence", label, hits, np.concatenate(probs), alpha)
