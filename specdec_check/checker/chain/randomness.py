"""Randomness of a chain verifier: independence across calls and rows, and a row's law unchanged by the
rows beside it (determinism is :class:`specdec_check.checker.checks.randomness.Determinism`)."""

from __future__ import annotations

import numpy as np

from ...exact.kernels import acceptance, step_law_given_acceptance
from ..checks.base import Check
from ..checks.randomness import INDEPENDENCE_TESTS_PER_PAIRING, MAX_PAIRS, MIN_CALLS, MIN_PAIRS, RANDOMNESS_ROWS, \
    RANDOMNESS_SHARE, collision_verdict, independence_tests, pair_pit_verdict
from ..core.kind import PlannedTest
from ..core.tally import PitTally
from .block import VerifierBlock, pit_from_bounds
from .contract import ABSOLUTE_TOLERANCE_SCALE, STANDARD_ONLY_EVENTS, impossible_events, parse_step
from .laws import PATH_LAW_MAX_VOCAB, cells_per_call

__all__ = ["BatchInvariance", "Independence", "PairPits"]

#: Smallest batch the batch-invariance check looks at: below 16 rows a batch effect has no room.
BATCH_INVARIANCE_MIN_ROWS = 16
#: Batch invariance: single-row calls (at least BATCH_MIN_CALLS) tested with at most BATCH_BINS PIT
#: bins (a few hundred samples fill 16 bins; more bins would only thin them).
BATCH_MIN_CALLS = 8
BATCH_BINS = 16


class Independence(Check):
    """Identical inputs, fresh generators: outputs collide with probability ``sum_o P(o)^2`` per pair,
    so the number of identical pairs is exactly Poisson-binomial, across calls and across the rows
    of one call; and the pair's two outputs are independent, so the joint PIT of their accepted counts
    (and of their final tokens) is uniform on the unit square (:func:`pair_pit_verdict`)."""

    power = ("exact one-sided Poisson-binomial collision counts, and two-sided joint-PIT identity tests of the "
             "accepted count and the final token, over 200 to 4000 identical-input pairs")

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        if "independence" not in selection or options.rule != "standard":
            return []  # the collision laws are the standard rule's; under "any" only the screen's pairs apply
        return independence_tests(scenario)

    def finish(self) -> None:
        ctx = self.ctx
        pairs = max(MIN_PAIRS, min(ctx.mode.max_samples // 8, MAX_PAIRS))
        for name, within in (("independence_calls", False), ("independence_rows", True)):
            if name in ctx.planned and not ctx.stopped:
                self.collisions(pairs, within_call=within)

    def collisions(self, pairs, *, within_call):
        """The collision count of identical-input pairs (one-sided: rows agreeing too often) and, on the
        same pairs, the joint PIT of their accepted counts and of their final tokens (two-sided: rows
        agreeing too rarely as well), each at a third of the pairing's alpha."""
        ctx, caller, s = self.ctx, self.caller, self.ctx.scenario
        label = "rows within a call" if within_call else "calls with fresh generators"
        alpha = ctx.spend("independence_rows" if within_call else "independence_calls") / INDEPENDENCE_TESTS_PER_PAIRING
        hits, probs = 0, []
        pit = PairPits(np.random.default_rng(ctx.rng.integers(2**63)))
        max_calls = max(MIN_CALLS, min(ctx.mode.max_calls // RANDOMNESS_SHARE,
                                       int(ctx.mode.max_cells // (RANDOMNESS_SHARE * cells_per_call(s)))))
        width = min(s.rows_per_call, RANDOMNESS_ROWS)
        half = width // 2
        windows = min(max_calls, -(-pairs // half)) if within_call else min(-(-max_calls // 2), -(-pairs // width))
        # Within a call, only ``half`` distinct rows are drawn and each is repeated: a pair per row; an odd
        # width adds one unpaired row last, so the call has the scenario's own (odd) batch size. Each window comes
        # drawn in that layout (row i of the draw at 2i and 2i + 1): no draw of the distinct rows beside the paired
        # copy (41 MB at V = 32,000).
        layout = np.concatenate([np.repeat(np.arange(half), 2), np.arange(half, half + width % 2)])
        inputs = (caller.pool_of(half + width % 2, windows=windows, layout=layout) if within_call
                  else caller.pool_of(RANDOMNESS_ROWS, windows=windows))
        # Each window adds the same number of pairs (``half`` rows, or the window's rows), so ``windows`` is how many
        # the loop takes: as many as the pairs need, within the call budget.
        per_window = half if within_call else width
        done = 0
        while done < windows:
            whole = group = block = first = second = out = None  # the last group's arrays go before the next are drawn
            # The windows of one pooled draw are called one by one (the same seeds in the same order) and their
            # pairs judged together: one block of exact laws per pooled draw instead of one per window.
            whole, group = inputs.next_group(windows - done)
            firsts, seconds = [], []
            with ctx.seed_batch(len(group) * (1 if within_call else 2)) as seeds:
                for window in group:
                    if within_call:
                        out = caller.call_host(window, seeds.next(), "independence")
                        if out is None:
                            return
                        firsts.append(out[0:2 * half:2])
                        seconds.append(out[1:2 * half:2])
                    else:
                        firsts.append(caller.call_host(window, seeds.next(), "independence"))
                        seconds.append(caller.call_host(window, seeds.next(), "independence")
                                       if firsts[-1] is not None else None)
                        if seconds[-1] is None:
                            return
            window = out = None
            done += len(group)
            if within_call:  # each window's pairs: drawn row i at 2i (the first of its pair)
                rows = whole.head(slice(0, 2 * half, 2)) if len(group) == 1 else whole.head(
                    (np.arange(len(group))[:, None] * width + 2 * np.arange(half)[None, :]).reshape(-1))
            else:
                rows = whole
            whole = group = None
            first, second = np.concatenate(firsts), np.concatenate(seconds)
            block = VerifierBlock(rows, conditional=True, tables=self.caller.tables)
            hits += int(np.all(first == second, axis=1).sum())
            probs.append(block.collision_probs(bonus_missing=bool(self.counts.bonus_missing)))
            pit.add(block, parse_step(first, rows.draft_token_ids), parse_step(second, rows.draft_token_ids),
                    windows=[per_window] * (first.shape[0] // per_window))
            rows = None
        collision_verdict(ctx, "independence", label, hits, np.concatenate(probs), alpha)
        for what, (u_first, u_second) in pit.pairs().items():
            if u_first.size and not ctx.stopped:
                pair_pit_verdict(ctx, what, label, u_first, u_second, alpha)


class _RowScreen:
    """Whether a single-row call of a draw may hold an event of probability zero: True for every row
    :func:`~specdec_check.checker.chain.contract.impossible_events` reports (the same comparisons, on the row's
    numbers as Python floats, read after the call as that function reads them), so only those rows pay for it
    (0.12 ms a row; issue 31). NaN anywhere answers True."""

    def __init__(self, draw, tolerance):
        self.ids, self.gamma = draw.draft_token_ids, draw.draft_token_ids.shape[1]
        self.draft_probs, self.target_probs, self.tolerance = draw.draft_probs, draw.target_probs, float(tolerance)

    def _at_least(self, a, b):
        tol = self.tolerance
        if a != a or b != b:
            return True
        return a >= b if not tol else a >= b + tol * max(abs(a), abs(b)) + tol * ABSOLUTE_TOLERANCE_SCALE

    def maybe_impossible(self, b, accepted, final) -> bool:
        gamma, y = self.gamma, max(final, 0)
        final_target = float(self.target_probs[b, min(accepted, gamma), y])
        if final_target != final_target:
            return True
        if gamma:
            ids, target = self.ids[b].tolist(), self.target_probs[b]
            target_at = [float(target[j, ids[j]]) for j in range(min(accepted + 1, gamma))]  # p_j(x_j), j <= k
            k = min(accepted, gamma - 1)
            if accepted < gamma and final >= 0:
                p_x, q_x = target_at[k], float(self.draft_probs[b, k, ids[k]])
                if (self._at_least(p_x, q_x) and not p_x <= 0) or self._at_least(
                        float(self.draft_probs[b, k, y]), final_target):
                    return True
            if any(not p > 0 for p in target_at[:accepted]):
                return True
        return accepted == gamma and final >= 0 and not final_target > 0


class PairPits:
    """The randomized PITs of both outputs of identical-input pairs: of the accepted count, and of the
    final token given the stop (pairs where both rows emitted one), from a block's exact laws.

    A pair with an output of probability zero is left out: such an output never occurs under the null
    (so the test keeps its level), and it is the impossible-event check's finding, not this test's."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.count, self.final = ([], []), ([], [])

    def add(self, block, first, second, *, windows=None) -> None:
        """The pairs of ``block``'s rows. ``windows``: the rows of the consecutive calls the block joins (one call
        when None); the randomizing uniforms are drawn call by call, in the order one block per call draws them
        (each side's count, then its final tokens), so joining calls changes no PIT value."""
        outcomes = [block.outcome(steps.accepted, steps.final) for steps in (first, second)]
        possible = np.logical_and.reduce([(o.count_mass > 0) for o in outcomes])
        with_final = possible & np.logical_and.reduce(
            [(steps.final >= 0) & (o.mass > 0) & (o.total > 0) for steps, o in zip((first, second), outcomes)])
        rows, finals = np.flatnonzero(possible), np.flatnonzero(with_final)
        ends = np.cumsum(windows if windows is not None else [possible.size])
        kept, with_token = np.searchsorted(rows, ends), np.searchsorted(finals, ends)  # rows before each call's end
        draws = [[], [], [], []]  # side 0 counts, side 0 finals, side 1 counts, side 1 finals
        for c in range(ends.size):
            for side in (0, 1):
                draws[2 * side].append(self.rng.random(kept[c] - (kept[c - 1] if c else 0)))
                draws[2 * side + 1].append(self.rng.random(with_token[c] - (with_token[c - 1] if c else 0)))
        for side, o in enumerate(outcomes):  # block.pit_count and pit_final, on the kept rows
            self.count[side].append(pit_from_bounds(o.count_below[rows], o.count_mass[rows], block.count_total[rows],
                                                    np.concatenate(draws[2 * side]), o.stop[rows]))
            self.final[side].append(block.pit_final(o, finals, np.concatenate(draws[2 * side + 1])))

    def pairs(self) -> dict:
        """``{what: (first PITs, second PITs)}``."""
        return {what: (np.concatenate(a) if a else np.zeros(0), np.concatenate(b) if b else np.zeros(0))
                for what, (a, b) in (("accepted count", self.count), ("final token", self.final))}


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

    def _impossible(self, one, step) -> bool:
        """Report a single-row call's events of probability zero as the law loop words them
        (:func:`~specdec_check.checker.chain.contract.impossible_events`); True when there were any."""
        events = impossible_events(step, one.draft_token_ids, one.draft_probs, one.target_probs,
                                   tolerance=self.ctx.backend.tolerance)
        if self.ctx.options.rule == "any":
            events = [(m, e) for m, e in events if e["event"] not in STANDARD_ONLY_EVENTS]
        for message, evidence in events:
            self.ctx.recorder.failure("impossible", f"in a single-row call: {message}", evidence)
        return bool(events)

    def finish(self) -> None:
        ctx, caller, s = self.ctx, self.caller, self.ctx.scenario
        if ctx.stopped or "batch_invariance" not in ctx.planned:
            return
        tally = PitTally(s.name, "batch_invariance", bins=min(ctx.mode.pit_bins, BATCH_BINS),
                         alpha=ctx.spend("batch_invariance"), sequential=False)
        pit_rng = np.random.default_rng(ctx.rng.integers(2**63))
        budget = max(BATCH_MIN_CALLS, ctx.mode.max_calls // RANDOMNESS_SHARE)
        for _ in range(max(1, budget // s.rows_per_call + 1)):
            draw = caller.draw(rows=budget)
            used = min(s.rows_per_call, budget)
            # every row's (k, y) law at once (row by row, the same numbers): the calls stay one row each
            laws = step_law_given_acceptance(acceptance(draw.draft_token_ids[:used], draw.draft_probs[:used],
                                                        draw.target_probs[:used]),
                                             draw.draft_probs[:used], draw.target_probs[:used]).reshape(used, -1)
            # Each row is judged before the next call (a row with an impossible event ends the check there, as
            # it always did); its PIT waits in ``pending`` for one pass per draw (the same numbers, issue 31).
            screen = _RowScreen(draw, ctx.backend.tolerance)
            # rows the PIT's validation cannot refuse (finite, non-negative, summing to 1 well within its 1e-9): a
            # row it might refuse is added alone, so its error comes where single adds raised it
            sound = np.isfinite(laws).all(axis=1) & (laws >= 0).all(axis=1) & (np.abs(laws.sum(axis=1) - 1.0) <= 1e-10)
            pending = []
            with ctx.seed_batch(used) as seeds:
                for b in range(used):
                    one = draw.head(slice(b, b + 1))
                    out = caller.call_host(one, seeds.next(), "batch_invariance")
                    if out is None:
                        return
                    step = parse_step(out, one.draft_token_ids)
                    accepted, final = int(step.accepted[0]), int(step.final[0])
                    if final < 0:
                        continue
                    code = accepted * s.vocab_size + final
                    if screen.maybe_impossible(b, accepted, final) and self._impossible(one, step):
                        return
                    if not (sound[b] and laws[b, code] > 0):  # a zero-mass outcome the tolerant events let
                        tally.add_each(np.array([c for _, c in pending], dtype=np.int64),  # through: added alone
                                       laws[[r for r, _ in pending]], pit_rng)
                        pending = []
                        try:
                            tally.add(step.accepted * s.vocab_size + step.final, laws[b:b + 1], pit_rng)
                        except ValueError as exc:
                            ctx.recorder.failure("impossible", f"in a single-row call: {exc}")
                            return
                        continue
                    pending.append((b, code))
            if pending:
                tally.add_each(np.array([c for _, c in pending], dtype=np.int64), laws[[r for r, _ in pending]],
                               pit_rng)
            budget -= min(s.rows_per_call, budget)
            if budget <= 0:
                break
        ctx.recorder.record(tally.record(extra_details={"rows_per_call": 1}))
