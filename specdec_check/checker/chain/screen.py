"""The run of the screen (:class:`~specdec_check.scenarios.VerifierScreen`) before the battery.

First the structural part: one-row calls alternating the accept-all and partial probes, checked
for events of probability zero only (no false-alarm budget); a fully accepted row without a
bonus token is named at once. Then small exact tests, each on identical rows of one probe
built to make one kind of error loud (see :mod:`specdec_check.scenarios._screen`); each spends
one share of the run's alpha. The screen stops at its first finding. It is one check of the chain
kind (:class:`Screen`), run on the kind's caller with the impossible-event check and the token
counts of the battery's runs; its scenario has no law loop.
"""

from __future__ import annotations

import numpy as np

from ... import stats
from ...scenarios import OVERFLOW_TOKENS, SCREEN_PROBES, STRUCTURAL_PROBES
from ..checks.base import Check
from ..checks.randomness import DEPENDENCE, INDEPENDENCE_TESTS_PER_PAIRING, collision_verdict
from ..core.kind import PlannedTest
from ..core.report import TestRecord
from .block import VerifierBlock
from .contract import check_output, parse_step
from .counts import structural

__all__ = ["COUPLING_PAIRS", "Screen", "overflow_trials", "screen_plan"]

#: Two-row calls per coupling test of the screen: coupled rows agree in none of them, which the exact
#: two-sided binomial test rejects at p = 2 * 2^-32 = 4.7e-10, below the test's share of the default
#: 1e-6 budget in runs of up to 700 planned tests (1e-6 / 700 / 3 = 4.8e-10).
COUPLING_PAIRS = 32

#: The screen's exact tests in the order they run: (planned test, check that selects it).
_TESTS = (("first_token", "first_token"), ("independence_rows", "independence"),
          ("independence_calls", "independence"), ("accepted_count", "accepted_count"),
          ("stop_conditional", "stop_conditional"))


def screen_plan(scenario, options) -> list:
    """The screen's planned statistical tests under ``options.checks`` (none without "screen")."""
    selection = options.checks
    return [PlannedTest(test, check) for test, check in _TESTS if check in selection] if "screen" in selection else []


def overflow_trials(draft_token_ids, step) -> tuple:
    """``(hits, probs)`` of the overflow probe: every row that rejected a draft (at any position, the
    last included) and emitted a recovered token is a trial, a hit when that token is the last of the
    position's :data:`OVERFLOW_TOKENS` residual tokens (probability ``1 / OVERFLOW_TOKENS`` each)."""
    gamma = draft_token_ids.shape[1]
    rejected = np.flatnonzero((step.accepted < gamma) & (step.final >= 0))
    last = draft_token_ids[rejected, step.accepted[rejected]] + OVERFLOW_TOKENS
    return int((step.final[rejected] == last).sum()), np.full(rejected.size, 1.0 / OVERFLOW_TOKENS)


class Screen(Check):
    """The screen scenario's one check (see the module docstring): its probes run in :meth:`start`."""

    power = "exact: events of probability zero on every row; exact Poisson-binomial tests on identical rows"

    @classmethod
    def plan(cls, scenario, options) -> list:
        return screen_plan(scenario, options)

    def start(self) -> None:
        ctx = self.ctx
        if ctx.selected("screen"):
            self.structural_rows()
        self.structural_rows_seen, self.structural_ok = ctx.samples, not ctx.recorder.findings
        steps = {"first_token": self.near_one, "accepted_count": self.all_accepted,
                 "independence_rows": lambda: self.pairs(within_call=True),
                 "independence_calls": lambda: self.pairs(within_call=False), "stop_conditional": self.overflow}
        self.coupling_alpha = None
        for test in ctx.plan.tests:
            if ctx.stopped:
                break
            steps[test.name]()
        if self.coupling_alpha is not None and not ctx.stopped:  # last: the tests before name bugs within 90 rows
            self.coupling(self.coupling_alpha, acceptance=ctx.options.rule != "any")

    def finish(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        rows = self.structural_rows_seen
        ctx.recorder.record(TestRecord(
            s.name, "screen", "structural screen (events of probability zero, one row per call)",
            self.structural_ok, 0.0, rows,
            details={"rows": rows, "row_budget": s.row_budget, "probes": list(SCREEN_PROBES),
                     "skipped": None if ctx.selected("screen") else "check not selected"}))

    def draw(self, probe):
        return self.ctx.scenario.draw(self.ctx.rng, self.caller.law_rows, probe=probe)

    def structural_rows(self):
        ctx, s = self.ctx, self.ctx.scenario
        for i in range(s.row_budget):
            draw = self.draw(i % STRUCTURAL_PROBES)
            out, step = self.caller.call(draw, ctx.next_seed())
            if out is None:
                return
            if not isinstance(out, np.ndarray):  # one row: checked on the host
                out = ctx.backend.to_host(out)
                step = check_output(out, draw.draft_token_ids, s.vocab_size)[1]
            ctx.samples += 1
            block = VerifierBlock(draw, conditional=False)
            # These rows hold 0, 1/4, 1/2, 3/4 and 1 only: exact in every dtype, so p = q compares
            # equal and max(0, p - q) is exactly 0 wherever the rule forbids a token. No tolerance.
            if not structural(ctx, self.counts, block, out, step, block.outcome(step.accepted, step.final),
                              tolerance=0.0):
                return
            self.counts.add_tokens(block, step)
            if self.counts.bonus_missing:
                ctx.recorder.inefficiency("efficiency", f"row {ctx.samples - 1} of the screen accepted all {s.gamma} "
                                          "drafts and emitted no bonus token: one token per fully accepted step is "
                                          "thrown away (dropping it biases none of the emitted tokens)",
                                          {"probe": int(draw.pool_index[0]), "output": out[0].tolist()})
                ctx.recorder.stop()
                return

    def counted_call(self, draw, check):
        """A call on the host, checked for events of probability zero (at the backend's tolerance),
        with its tokens counted; None after a finding."""
        ctx = self.ctx
        out = self.caller.call_host(draw, ctx.next_seed(), check)
        if out is None:
            return None
        ctx.samples += out.shape[0]
        block, step = VerifierBlock(draw, conditional=False), parse_step(out, draw.draft_token_ids)
        if not structural(ctx, self.counts, block, out, step, block.outcome(step.accepted, step.final)):
            return None
        self.counts.add_tokens(block, step)
        return out

    def probe_test(self, *, probe, rows, check, method, count, message):
        """One call of ``rows`` identical rows of ``probe``; ``count(draw, out, step)`` gives ``(hits,
        probs)``, a count of outputs and the exact success probability of each trial; an exact
        two-sided Poisson-binomial test of it. A rejection is a failure that stops the screen."""
        ctx, s = self.ctx, self.ctx.scenario
        alpha = ctx.spend(check)
        draw = self.draw(SCREEN_PROBES.index(probe)).head(np.zeros(rows, dtype=np.int64))
        out = self.counted_call(draw, check)
        if out is None:
            return
        hits, probs = count(draw, out, parse_step(out, draw.draft_token_ids))
        res = stats.poisson_binomial_test(hits, probs, alpha=alpha)
        details = {"hits": hits, "trials": int(probs.size), "expected": float(probs.sum()), "pvalue": float(res.pvalue)}
        ctx.recorder.record(TestRecord(s.name, check, f"exact Poisson-binomial ({method}, screen)", not res.rejected,
                                       alpha, int(probs.size), statistic=float(hits), pvalue=float(res.pvalue),
                                       details=details))
        if res.rejected:
            ctx.recorder.failure(check, f"{hits} of {probs.size} {message}, {probs.sum():.3g} expected (p = "
                                 f"{res.pvalue:.3g})", details, stop=True)

    # -- the exact tests ---------------------------------------------------------------------------
    def near_one(self):
        """First drafts with p/q = 0.99: the first token's law is p_0 for any lossless rule, so it
        equals the draft with probability 0.99."""
        def count(draw, out, step):
            first = draw.draft_token_ids[:, 0]
            return int((out[:, 0] == first).sum()), draw.target_probs[np.arange(first.size), 0, first]

        self.probe_test(probe="near-one", rows=self.ctx.scenario.near_one_rows, check="first_token",
                        method="first token equal to a draft of p/q = 0.99", count=count,
                        message="first tokens equalled a draft of target probability 0.99 (draft probability 1): "
                                "the first token's law is not the target's; a draft with p < q must still be "
                                "accepted with probability p/q")

    def all_accepted(self):
        """Seven drafts of p/q = 1/2 per row: all are accepted with probability 2^-7 per row."""
        gamma = self.ctx.scenario.gamma

        def count(draw, out, step):
            probs = VerifierBlock(draw, conditional=False).count_law[:, gamma]
            return int((step.accepted == gamma).sum()), probs

        self.probe_test(probe="half", rows=self.ctx.scenario.half_rows, check="accepted_count",
                        method=f"rows accepting all {gamma} drafts of p/q = 1/2", count=count,
                        message=f"rows accepted all {gamma} drafts of acceptance probability 1/2 each: the "
                                "acceptance tests of a row's positions are not independent (a uniform reused "
                                "across positions?)")

    def overflow(self):
        """Residuals uniform on 8 tokens (mass 0.1): a recovered token is the last of them w.p. 1/8."""
        self.probe_test(probe="overflow", rows=self.ctx.scenario.overflow_rows, check="stop_conditional",
                        method=f"recovered token on the last of {OVERFLOW_TOKENS} equal residual tokens",
                        count=lambda draw, out, step: overflow_trials(draw.draft_token_ids, step),
                        message=f"recovered tokens were the last of {OVERFLOW_TOKENS} equally likely residual tokens: "
                                "the residual is not sampled from its normalised law (an unnormalised inverse CDF "
                                "overflowing onto the last token?)")

    def coupling(self, alpha: float, *, acceptance: bool) -> bool:
        """Two rows of one call, identical inputs: do they agree too rarely (antithetic, stratified or
        systematic uniforms across a call's rows)? Two exact two-sided binomial tests on
        :data:`COUPLING_PAIRS` two-row calls each: on half rows (first draft accepted with probability 1/2),
        whether both rows accept or both reject it; on spread rows (first token uniform on 1000 tokens),
        whether both first tokens fall in the same half. Each agreement has probability exactly 1/2 under
        independence; coupled rows agree never (or always). Returns False after a finding.

        Under ``rule="any"`` only the spread rows are tested (whatever the rule, their first token follows
        target row 0 there); the half rows' acceptance is the standard rule's."""
        ctx = self.ctx
        probes = ((("half", "accepted the first draft"),) if acceptance else ()) + (("spread", "first token"),)
        for probe, what in probes:
            hits, probs = 0, []
            for _ in range(COUPLING_PAIRS):
                draw = self.draw(SCREEN_PROBES.index(probe))
                out = self.counted_call(draw.head(np.zeros(2, dtype=np.int64)), "independence")
                if out is None:
                    return False
                if probe == "half":
                    accepted = out[:, 0] == draw.draft_token_ids[0, 0]
                    a = float(VerifierBlock(draw, conditional=False).accept_first[0])
                    hits += int(accepted[0] == accepted[1])
                    probs.append(a * a + (1 - a) * (1 - a))
                else:
                    law = draw.target_probs[0, 0]
                    cdf = np.cumsum(law)
                    lower = cdf[out[:, 0]] <= 0.5  # the tokens whose law is in the first half (mass 1/2 exactly)
                    below = float(cdf[cdf <= 0.5][-1]) if (cdf <= 0.5).any() else 0.0
                    hits += int(lower[0] == lower[1])
                    probs.append(below * below + (1 - below) * (1 - below))
            res = stats.poisson_binomial_test(hits, np.array(probs), alpha=alpha)
            details = {"agreements": hits, "pairs": len(probs), "expected": float(np.sum(probs)),
                       "pvalue": float(res.pvalue)}
            ctx.recorder.record(TestRecord(ctx.scenario.name, "independence",
                                           f"exact two-sided binomial of pairs agreeing ({what}, two rows of one call, "
                                           "screen)", not res.rejected, alpha, len(probs), statistic=float(hits),
                                           pvalue=float(res.pvalue), details=details))
            if res.rejected:
                ctx.recorder.failure("independence", f"two rows of one call with identical inputs agreed on whether "
                                     f"they {what if probe == 'half' else 'fell in the same half of its law'} in "
                                     f"{hits} of {len(probs)} calls, {np.sum(probs):.3g} expected under "
                                     f"independence (p = {res.pvalue:.3g}): the rows' randomness is coupled "
                                     "(antithetic, stratified or shared uniforms across a call's rows?)",
                                     {**details, DEPENDENCE: True}, stop=True)
                return False
        return True

    def pairs(self, *, within_call: bool):
        """Identical spread rows, as two rows of one call or in two calls with fresh generators:
        independent randomness makes them agree with probability 1/1000 per pair. Under rule="any"
        the first tokens are compared: the draft is one-hot, so every lossless rule's first token
        follows target row 0 (uniform on 1000 tokens) whatever the rest of its output."""
        first_only = self.ctx.options.rule == "any"
        ctx, s = self.ctx, self.ctx.scenario
        alpha = ctx.spend("independence_rows" if within_call else "independence_calls")
        if within_call:  # the pairing's share, split with the two coupling tests (run after the other tests)
            alpha /= INDEPENDENCE_TESTS_PER_PAIRING
            self.coupling_alpha = alpha
        hits, probs = 0, []
        for _ in range(s.pairs):
            draw = self.draw(SCREEN_PROBES.index("spread"))
            if within_call:
                out = self.counted_call(draw.head(np.zeros(2, dtype=np.int64)), "independence")
                outputs = None if out is None else (out[0], out[1])
            else:
                first = self.counted_call(draw, "independence")
                second = None if first is None else self.counted_call(draw, "independence")
                outputs = None if second is None else (first[0], second[0])
            if outputs is None:
                return
            if first_only:
                hits += int(outputs[0][0] == outputs[1][0])
                first = draw.target_probs[0, 0]
                probs.append(float(first @ first))
            else:
                hits += int(np.array_equal(*outputs))
                probs.append(VerifierBlock(draw, conditional=True).collision_probs()[0])
        label = "identical rows within a call" if within_call else "calls with fresh generators on identical rows"
        if collision_verdict(ctx, "independence", f"{label} (screen)", hits, np.array(probs), alpha):
            ctx.recorder.stop()
