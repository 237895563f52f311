"""Randomness checks shared by every verifier kind: determinism under a fixed generator state, and the
exact collision test behind each kind's independence check."""

from __future__ import annotations

import numpy as np

from ... import stats
from ..core.kind import PlannedTest
from ..core.report import TestRecord
from .base import Check

__all__ = ["DEPENDENCE", "Determinism", "INDEPENDENCE_TESTS_PER_PAIRING", "MAX_PAIRS", "MIN_CALLS", "MIN_PAIRS", "PAIR_MARGINAL_GUARD",
           "PAIR_PIT_BINS",
           "RANDOMNESS_ROWS", "RANDOMNESS_SHARE", "collision_verdict", "independence_tests", "pair_pit_verdict"]

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
#: PIT bins per row of a pair in the two-sided independence test: 4 x 4 = 16 equiprobable cells, so the
#: 200 pairs of the smallest test put 12.5 in each (the identity test's asymptotics hold) and an
#: antithetic pair (``u`` and ``1 - u``), which fills the 4 anti-diagonal cells, is rejected at any alpha
#: above 1e-40.
PAIR_PIT_BINS = 4
#: Tests on one set of identical-input pairs (the collision count, and the joint PIT of the accepted
#: count and of the final token where the kind has them): the pairing's alpha share is split evenly.
INDEPENDENCE_TESTS_PER_PAIRING = 3
#: The joint-PIT pair test is uniform on its grid only if the rows are independent *and* each row's law is
#: exact. When the pooled PITs of the pairs' rows (2n samples, PAIR_PIT_BINS bins) already depart from
#: uniform at this p-value, a rejection could be the row law's, not dependence, so the pair test is not
#: judged (the law tests name the law's error). It spends no alpha: it can only withhold a finding, so the
#: false-alarm rate stays at most the test's alpha; a coupled verifier whose rows are each exact keeps
#: uniform marginals and meets it with probability 1e-3.
PAIR_MARGINAL_GUARD = 1e-3
#: Evidence key of an independence failure whose test separates dependence from a wrong row law (the
#: marginal-guarded pair test, the screen's coupling tests after its law probes passed): only those put
#: the law findings down as possible consequences (core.verdict.by_cause). A collision count does not: a
#: wrong law changes the collision rate too.
DEPENDENCE = "dependence"


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


def pair_pit_verdict(ctx, what, label, first_u, second_u, alpha, *, evidence=None) -> bool:
    """Two-sided test of independence of the rows of identical-input pairs: record it, fail when rejected.

    ``first_u`` and ``second_u`` [n] are the randomized PITs (Brockwell 2007) of pair ``i``'s two outputs
    (``what``: the accepted count, or the final token given the stop) under their exact laws, with
    independent randomisation. Each is exactly Uniform(0, 1); if the two outputs are independent, so are
    the two PITs (Rosenblatt 1952), so the pair's cell in a :data:`PAIR_PIT_BINS` x :data:`PAIR_PIT_BINS`
    grid is uniform on its cells, whatever the laws, and the cell counts of independent pairs are
    multinomial: an exact identity test of them sees rows that agree too rarely (antithetic or
    stratified randomness) as well as too often. Not judged when the rows' pooled PITs are themselves off
    (:data:`PAIR_MARGINAL_GUARD`). Returns whether it rejected."""
    from ..core.tally import CountTally

    bins = PAIR_PIT_BINS
    first = np.minimum((np.asarray(first_u) * bins).astype(np.int64), bins - 1)
    second = np.minimum((np.asarray(second_u) * bins).astype(np.int64), bins - 1)
    tally = CountTally(ctx.scenario.name, "independence", np.full(bins * bins, 1.0 / bins**2), alpha=alpha,
                       sequential=False, describe=lambda cell: f"PIT cell ({cell // bins}, {cell % bins}) of the pair")
    tally.method = f"joint PIT of identical-input pairs, {what}, {label}, {bins}x{bins} cells"
    # the guard needs the p-value alone: identity_pvalues gives identity_test's without its detectability plan
    marginal = stats.identity_pvalues(np.bincount(np.concatenate([first, second]), minlength=bins)[None, :],
                                      np.full(bins, 1.0 / bins))[0]
    if marginal <= PAIR_MARGINAL_GUARD:
        return False  # the rows' own law is off: not a question of independence (see PAIR_MARGINAL_GUARD)
    tally.add_codes(first * bins + second)
    record = tally.record(extra_details={"pairs": int(first.size), **(evidence or {})})
    ctx.recorder.record(record)
    if not record.passed:
        diagonal = float(np.mean(first == second))
        worst = record.details["worst_cells"][:2]
        ctx.recorder.failure("independence", f"rows with identical inputs are not independent across {label}: the "
                             f"joint law of the two rows' {what} differs from the product of their exact laws "
                             f"(p = {record.pvalue:.3g} over {first.size:,} pairs; same PIT quarter in "
                             f"{diagonal:.0%} of pairs against 25% under independence; "
                             f"{'; '.join(c['cell'] for c in worst)} most off); the rows' randomness is "
                             "coupled (antithetic, stratified or shared uniforms?)",
                             {"pvalue": record.pvalue, "pairs": int(first.size), "same_quarter": diagonal,
                              "worst_cells": worst, DEPENDENCE: True, **(evidence or {})})
    return not record.passed


def independence_tests(scenario) -> list:
    """The planned collision tests of an independence check: across calls, and across the rows of a call
    where a call has two or more rows."""
    tests = [PlannedTest("independence_calls", "independence")]
    if scenario.rows_per_call >= 2:
        tests.append(PlannedTest("independence_rows", "independence"))
    return tests
