"""Randomness: determinism under a fixed generator state, independence across calls and rows,
and a row's law unchanged by the rows beside it."""

from __future__ import annotations

import numpy as np

from ... import stats
from ...exact.kernels import acceptance, step_law_given_acceptance
from .._block import VerifierBlock
from .._contract import parse_step
from .._kinds import PlannedTest
from .._report import TestRecord
from .._tally import PitTally
from ._base import Check
from ._laws import PATH_LAW_MAX_VOCAB, cells_per_call

__all__ = ["BatchInvariance", "Determinism", "Independence", "RANDOMNESS_ROWS", "collision_verdict"]

#: Rows per call in the determinism and independence checks: pairs, not power, are what they need,
#: and 4096 rows give 2048 within-call pairs per call at a cost independent of rows_per_call.
RANDOMNESS_ROWS = 4096
#: Collision pairs per test: at least 200 (a shared uniform collides on most pairs, so 200 pairs
#: reject at any alpha above 1e-30), at most 4000 (power against partial sharing saturates).
MIN_PAIRS, MAX_PAIRS = 200, 4000
#: Smallest batch the batch-invariance check looks at: below 16 rows a batch effect has no room.
BATCH_INVARIANCE_MIN_ROWS = 16
#: The randomness checks spend at most 1/RANDOMNESS_SHARE of the mode's calls and cells each (the law
#: tests get the rest), and at least MIN_CALLS calls (pairs need two calls, a few pairs of pairs).
RANDOMNESS_SHARE = 4
MIN_CALLS = 4
#: Batch invariance: single-row calls (at least BATCH_MIN_CALLS) tested with at most BATCH_BINS PIT
#: bins (a few hundred samples fill 16 bins; more bins would only thin them).
BATCH_MIN_CALLS = 8
BATCH_BINS = 16


class Determinism(Check):
    """Two calls with the same generator state on the same inputs must give the same output."""

    power = "exact replay of one call of at most 4096 rows (no alpha spent)"

    def __init__(self, run, caller, counts):
        self.run, self.caller = run, caller

    def finish(self) -> None:
        run, caller = self.run, self.caller
        if run.stopped or not run.selected("determinism"):
            return
        draw = caller.draw(rows=RANDOMNESS_ROWS)
        seed = run.next_seed()
        first = caller.call(draw, seed, "determinism")
        second = caller.call(draw, seed, "determinism") if first is not None else None
        same = first is not None and second is not None and np.array_equal(first, second)
        if first is not None and second is not None and not same:
            row = int(np.flatnonzero((first != second).any(axis=1))[0])
            run.fail("determinism", "two calls with the same generator state on the same inputs gave different "
                     "outputs: the verifier uses randomness other than its generator",
                     {"row": row, "first": first[row].tolist(), "second": second[row].tolist()})
        run.record(TestRecord(run.scenario.name, "determinism", "exact replay", same, 0.0, int(len(draw.pool_index))))


def collision_verdict(run, check, label, hits, probs, alpha) -> None:
    """Exact one-sided Poisson-binomial test of ``hits`` identical pairs (pair ``i`` collides with
    probability ``probs[i]`` under independence); record it, fail when rejected."""
    s = run.scenario
    res = stats.poisson_binomial_test(hits, np.clip(probs, 0.0, 1.0), alpha=alpha, alternative="greater")
    run.record(TestRecord(
        s.name, check, f"exact Poisson-binomial collision count ({label})", not res.rejected, alpha,
        int(probs.size), statistic=float(hits), pvalue=float(res.pvalue),
        details={"collisions": hits, "expected": float(probs.sum()), "pairs": int(probs.size)},
    ))
    if res.rejected:
        run.fail(check, f"identical inputs gave identical outputs too often across {label}: {hits} of "
                 f"{probs.size} pairs vs {probs.sum():.3g} expected under independence (p = {res.pvalue:.3g}); "
                 "the randomness is shared or does not come from the generator",
                 {"collisions": hits, "pairs": int(probs.size), "expected": float(probs.sum()),
                  "pvalue": float(res.pvalue)})


class Independence(Check):
    """Identical inputs, fresh generators: outputs collide with probability ``sum_o P(o)^2`` per pair,
    so the number of identical pairs is exactly Poisson-binomial, across calls and across the rows
    of one call."""

    power = "exact one-sided Poisson-binomial collision counts over 200 to 4000 pairs"

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        if "independence" not in selection or options.rule != "standard":
            return []  # the collision laws are the standard rule's; under "any" only the screen's pairs apply
        tests = [PlannedTest("independence_calls", "independence")]
        if scenario.rows_per_call >= 2:
            tests.append(PlannedTest("independence_rows", "independence"))
        return tests

    def __init__(self, run, caller, counts):
        self.run, self.caller, self.counts = run, caller, counts

    def finish(self) -> None:
        run = self.run
        pairs = max(MIN_PAIRS, min(run.mode.max_samples // 8, MAX_PAIRS))
        for name, within in (("independence_calls", False), ("independence_rows", True)):
            if name in run.planned and not run.stopped:
                self.collisions(pairs, within_call=within)

    def collision_probs(self, draw):
        block = VerifierBlock(draw, conditional=True, tables=self.caller.tables)
        return block.collision_probs(bonus_missing=bool(self.counts.bonus_missing))

    def collisions(self, pairs, *, within_call):
        run, caller, s = self.run, self.caller, self.run.scenario
        label = "rows within a call" if within_call else "calls with fresh generators"
        alpha = run.spend("independence_rows" if within_call else "independence_calls")
        hits, probs, n_calls = 0, [], 0
        max_calls = max(MIN_CALLS, min(run.mode.max_calls // RANDOMNESS_SHARE,
                                       int(run.mode.max_cells // (RANDOMNESS_SHARE * cells_per_call(s)))))
        width = min(s.rows_per_call, RANDOMNESS_ROWS)
        half = width // 2
        windows = min(max_calls, -(-pairs // half)) if within_call else min(-(-max_calls // 2), -(-pairs // width))
        inputs = caller.pool_of(RANDOMNESS_ROWS, windows=windows)
        while len(probs) == 0 or sum(p.size for p in probs) < pairs:
            if n_calls >= max_calls:
                break
            draw = inputs.next()
            if within_call:
                draw = draw.head(np.repeat(np.arange(half), 2))
                out = caller.call(draw, run.next_seed(), "independence")
                n_calls += 1
                if out is None:
                    return
                same = np.all(out[0::2] == out[1::2], axis=1)
                probs.append(self.collision_probs(draw)[0::2])
            else:
                first = caller.call(draw, run.next_seed(), "independence")
                second = caller.call(draw, run.next_seed(), "independence") if first is not None else None
                n_calls += 2
                if second is None:
                    return
                same = np.all(first == second, axis=1)
                probs.append(self.collision_probs(draw))
            hits += int(same.sum())
        collision_verdict(run, "independence", label, hits, np.concatenate(probs), alpha)


class BatchInvariance(Check):
    """Rows of a large-batch scenario, one row per call: the (k, y) law must not change."""

    power = "randomized PIT of (k, y) over up to max_calls / 4 single-row calls (at most 16 bins)"

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        if ("batch_invariance" in selection and scenario.rows_per_call >= BATCH_INVARIANCE_MIN_ROWS
                and scenario.vocab_size <= PATH_LAW_MAX_VOCAB):
            return [PlannedTest("batch_invariance", "batch_invariance")]
        return []

    def __init__(self, run, caller, counts):
        self.run, self.caller = run, caller

    def finish(self) -> None:
        run, caller, s = self.run, self.caller, self.run.scenario
        if run.stopped or "batch_invariance" not in run.planned:
            return
        tally = PitTally(s.name, "batch_invariance", bins=min(run.mode.pit_bins, BATCH_BINS),
                         alpha=run.spend("batch_invariance"), sequential=False)
        pit_rng = np.random.default_rng(run.rng.integers(2**63))
        budget = max(BATCH_MIN_CALLS, run.mode.max_calls // RANDOMNESS_SHARE)
        for _ in range(max(1, budget // s.rows_per_call + 1)):
            draw = caller.draw(rows=budget)
            for b in range(min(s.rows_per_call, budget)):
                one = draw.head(slice(b, b + 1))
                out = caller.call(one, run.next_seed(), "batch_invariance")
                if out is None:
                    return
                step = parse_step(out, one.draft_token_ids)
                if step.final[0] < 0:
                    continue
                law = step_law_given_acceptance(acceptance(one.draft_token_ids, one.draft_probs, one.target_probs),
                                                one.draft_probs, one.target_probs).reshape(1, -1)
                try:
                    tally.add(step.accepted * s.vocab_size + step.final, law, pit_rng)
                except ValueError as exc:
                    run.fail("impossible", f"single-row call produced an impossible outcome: {exc}")
                    return
            budget -= min(s.rows_per_call, budget)
            if budget <= 0:
                break
        run.record(tally.record(extra_details={"rows_per_call": 1}))
