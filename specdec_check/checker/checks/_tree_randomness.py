"""Randomness of a tree verifier: determinism under a fixed generator state, independence across
calls and across the rows of a call (exact collision counts, as for chains)."""

from __future__ import annotations

import numpy as np

from .._kinds import PlannedTest
from .._report import TestRecord
from .._tree_block import collision_probs
from .._tree_caller import POOL_CELLS
from ._randomness import MAX_PAIRS, MIN_CALLS, MIN_PAIRS, RANDOMNESS_ROWS, RANDOMNESS_SHARE, collision_verdict

__all__ = ["TreeDeterminism", "TreeIndependence"]

#: Probability cells of tree laws one collision test builds at most (32 MiB of float64): the pairs it
#: needs shrink with the tree and the vocabulary, down to MIN_PAIRS (200 pairs already reject a shared
#: uniform, which collides on most pairs, at any alpha above 1e-30).
RANDOMNESS_CELLS = 1 << 22


class TreeDeterminism:
    """Two calls with the same generator state on the same trees must give the same output."""

    power = "exact replay of one call (no alpha spent)"

    def __init__(self, run, caller):
        self.run, self.caller = run, caller

    def finish(self) -> None:
        run, caller = self.run, self.caller
        if run.stopped or not run.selected("determinism"):
            return
        block = caller.block(caller.draw())
        seed = run.next_seed()
        first = caller.call(block, seed, "determinism")[0]
        second = caller.call(block, seed, "determinism")[0] if first is not None else None
        same = first is not None and second is not None and np.array_equal(first, second)
        if first is not None and second is not None and not same:
            row = int(np.flatnonzero((first != second).any(axis=1))[0])
            run.fail("determinism", "two calls with the same generator state on the same trees gave different "
                     "outputs: the verifier uses randomness other than its generator",
                     {"row": row, "first": first[row].tolist(), "second": second[row].tolist()})
        run.record(TestRecord(run.scenario.name, "determinism", "exact replay", same, 0.0, block.batch))


class TreeIndependence:
    """Identical trees, fresh generators: outputs collide with probability ``sum_o P(o)^2`` per pair, so the
    number of identical pairs is exactly Poisson-binomial, across calls and across the rows of one call."""

    power = "exact one-sided Poisson-binomial collision counts over 200 to 4000 pairs"

    @classmethod
    def plan(cls, scenario, selection) -> list:
        if "independence" not in selection:
            return []
        tests = [PlannedTest("independence_calls", "independence")]
        if scenario.rows_per_call >= 2:
            tests.append(PlannedTest("independence_rows", "independence"))
        return tests

    def __init__(self, run, caller, cells_per_call):
        self.run, self.caller, self.cells_per_call = run, caller, cells_per_call

    def finish(self) -> None:
        run = self.run
        s = run.scenario
        if any(f.kind == "failure" for f in run.findings):  # the expected collisions assume the exact law
            for name in ("independence_calls", "independence_rows"):
                if name in run.planned and not run.stopped:
                    run.note_skipped("independence", f"{name}: the scenario already failed; the expected collision "
                                     "counts assume the exact law")
            return
        cap = RANDOMNESS_CELLS // ((s.nodes + 1) * s.vocab_size)
        pairs = max(MIN_PAIRS, min(run.mode.max_samples // 8, MAX_PAIRS, cap))
        for name, within in (("independence_calls", False), ("independence_rows", True)):
            if name in run.planned and not run.stopped:
                self.collisions(name, pairs, within_call=within)

    def collisions(self, name, pairs, *, within_call):
        run, caller, s = self.run, self.caller, self.run.scenario
        label = "rows within a call" if within_call else "calls with fresh generators"
        alpha = run.spend(name)
        max_calls = max(MIN_CALLS, min(run.mode.max_calls // RANDOMNESS_SHARE,
                                       int(run.mode.max_cells // (RANDOMNESS_SHARE * self.cells_per_call))))
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
                out = caller.call(block, run.next_seed(), "independence")[0]
                calls += 1
                if out is None:
                    return
                same = np.all(out[0::2] == out[1::2], axis=1)
                probs.append(collision_probs(block)[0::2])
            else:
                block = caller.block(caller.draw(calls=per_call))
                first = caller.call(block, run.next_seed(), "independence")[0]
                second = caller.call(block, run.next_seed(), "independence")[0] if first is not None else None
                calls += 2
                if second is None:
                    return
                same = np.all(first == second, axis=1)
                probs.append(collision_probs(block))
            hits += int(same.sum())
        collision_verdict(run, "independence", label, hits, np.concatenate(probs), alpha)
