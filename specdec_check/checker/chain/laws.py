"""The output-law tests of a verifier scenario: each call's outputs against their exact laws.

Per-row laws go through a randomized probability integral transform (Brockwell 2007), so they
are tested at any vocabulary size; the step law integrated over drafts (Leviathan et al. 2023,
Theorem 3.5) is counted directly where its outcomes can be enumerated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...exact import decode_emitted, encode_emitted, num_step_outcomes, step_law
from ..backends.xp import concat
from ..checks.base import Check
from ..core.kind import PlannedTest
from ..core.planning import planned_samples
from ..core.tally import CountTally, PitTally

__all__ = ["LawChecks", "PATH_LAW_MAX_VOCAB"]

#: Largest vocabulary for the path-conditional joint (k, y) test: (gamma+1) * V cells per row make
#: a PIT over (k, y) worthwhile only while the step's law is not dominated by one position's tail.
PATH_LAW_MAX_VOCAB = 1000

#: The per-row law tests, in the order their tallies are made: (test, what it tests).
_PIT_TESTS = ("first_token", "stop_conditional", "accepted_count", "step_law")
#: The test of the step law integrated over drafts (owned by the ``step_law`` check).
_INTEGRATED = "step_law_integrated"
#: The first token's counts per context of the prompt pool (owned by the ``first_token`` check).
_CONTEXT_COUNTS = "first_token_counts"
#: Largest (pool contexts x V) counted per context: the identity test over these cells has the
#: sqrt(cells) / eps^2 rate, so beyond 2^16 cells (8 contexts at V = 8,192) the checker's sample
#: sizes leave it no power the PIT does not have, and each call's bincount grows with the cells.
CONTEXT_COUNT_CELLS = 1 << 16
#: Outcomes buffered before they are counted: one bincount per this many codes (at least), not per
#: call, so that the cost per call does not grow with the cells (the e-process looks at buffer ends).
COUNT_BUFFER = 1 << 14


@dataclass(frozen=True)
class OutcomeName:
    """How the outcomes of per-row test ``test`` read in a report: tokens, accepted counts, or both
    (the ``step_law`` code is ``accepted * V + final``). A picklable callable: a tally carrying it
    travels from a shard's worker to the driver."""

    test: str
    vocab_size: int

    def __call__(self, code) -> str:
        if self.test == "accepted_count":
            return f"{code} draft(s) accepted"
        if self.test == "step_law":
            return f"{code // self.vocab_size} draft(s) accepted, then token {code % self.vocab_size}"
        if self.test == "stop_conditional":
            return f"final token {code}"
        return f"token {code}"


def outcome_namer(name: str, vocab_size: int) -> OutcomeName:
    """The :class:`OutcomeName` of per-row test ``name``."""
    return OutcomeName(name, int(vocab_size))


@dataclass(frozen=True, eq=False)
class EmittedName:
    """How a cell of the integrated step law (``context * outcomes + emitted string``) reads: the
    context's prompt and the emitted tokens (picklable, as :class:`OutcomeName`)."""

    prompts: object
    vocab_size: int
    gamma: int
    outcomes: int

    def __call__(self, code) -> str:
        context, emitted = divmod(code, self.outcomes)
        tokens = decode_emitted(np.array([emitted]), self.vocab_size, self.gamma)[0]
        prompt = self.prompts[context]
        return (f"context {context} (prompt {prompt[prompt >= 0].tolist()}) emitted tokens "
                f"{tokens[tokens >= 0].tolist()}")


def emitted_namer(prompts, vocab_size: int, gamma: int, outcomes: int) -> EmittedName:
    """The :class:`EmittedName` of the integrated step law's cells."""
    return EmittedName(prompts, int(vocab_size), int(gamma), int(outcomes))


@dataclass(frozen=True)
class ContextTokenName:
    """How a cell of the first token's counts per context (``context * V + token``) reads."""

    vocab_size: int

    def __call__(self, code) -> str:
        return f"token {code % self.vocab_size} after prompt context {code // self.vocab_size}"


def first_token_law(target, prompts) -> np.ndarray:
    """float64 [P, V]: the target's law of the token after each prompt of the pool (``-1`` padding
    dropped; ``start_probs`` for an empty prompt). Under any lossless verifier the first emitted token
    has exactly this law given the context (Leviathan et al. 2023, Theorem 3.5: the step's first
    token is a sample of the target's first row), so counts per (context, token) are multinomial
    with these probabilities over a uniformly drawn pool context."""
    rows = []
    for prompt in prompts:
        tokens = prompt[prompt >= 0]
        rows.append(target.last_probs(tokens[None])[0] if tokens.size else target.start_probs())
    return np.stack(rows)


class LawChecks(Check):
    """First token against target row 0; the final token given the stop position against the
    residual (or bonus) row; the accepted count; the joint (k, y) given the drafted path; and the
    step law integrated over drafts and contexts where enumerable.

    Each test spends its alpha share half on a Lindon & Malek (2022) e-process watched as the
    samples grow (failures stop early) and half on the exact fixed-n identity test at the end.
    """

    power = ("each PIT test is sized by samples_for(design TV, pit bins, alpha share) and capped by the mode; "
             "its record states the smallest TV it could detect with power 0.99")

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        tests = [PlannedTest(name, name) for name in ("first_token", "stop_conditional", "accepted_count")
                 if name in selection and (scenario.gamma or name == "first_token")]
        if ("first_token" in selection and scenario.fixed_target_probs is None
                and scenario.prompt_pool * scenario.vocab_size <= CONTEXT_COUNT_CELLS):
            tests.append(PlannedTest(_CONTEXT_COUNTS, "first_token"))
        if "step_law" in selection:
            if scenario.vocab_size <= PATH_LAW_MAX_VOCAB:
                tests.append(PlannedTest("step_law", "step_law"))
            if scenario.enumerable:
                tests.append(PlannedTest(_INTEGRATED, "step_law"))
        return tests

    merged = True

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.tallies, self.integrated, self.outcomes = {}, None, 0
        self.context_counts, self.buffered = None, []
        self.pit_rng = None

    @property
    def uses_reuse(self) -> bool:
        """Whether a reused block's later calls feed a test (the tests given the drafted paths do; the
        first token's law holds over fresh drafts only)."""
        return any(name in self.ctx.planned for name in ("stop_conditional", "accepted_count", "step_law"))

    def calls_needed(self, reuse: int) -> int:
        """Calls until the per-row tests can detect the design TV (before the mode's caps): every call
        feeds the tests given the drafted paths, one call in ``reuse`` the first-token test."""
        s, mode, planned = self.ctx.scenario, self.ctx.mode, self.ctx.planned
        if not any(name in planned for name in _PIT_TESTS):
            return 0
        n = min(planned_samples(mode.design_tv, mode.pit_bins, self.ctx.ledger.per_check / 2), mode.max_samples)
        return -(-n * (1 if self.uses_reuse else reuse) // s.rows_per_call)

    @property
    def conditional(self) -> bool:
        """Whether the loop's blocks need the final token's laws (the tests given the stop position)."""
        return "stop_conditional" in self.tallies or "step_law" in self.tallies

    def start(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        looks = not ctx.part  # a later shard's tallies only count: it cannot see the e-process before it
        tv = ctx.mode.design_tv  # the e-process keeps its power down to the design TV
        for name in _PIT_TESTS:
            if name in ctx.planned:
                self.tallies[name] = PitTally(s.name, name, bins=ctx.mode.pit_bins, alpha=ctx.spend(name),
                                              sequential=looks, resolution=tv,
                                              describe=outcome_namer(name, s.vocab_size))
        if _INTEGRATED in ctx.planned:
            pool = self.caller.pool
            law = np.concatenate([step_law(s.target, s.draft, s.gamma, p[p >= 0]) for p in pool]) / len(pool)
            self.outcomes = num_step_outcomes(s.vocab_size, s.gamma)
            self.integrated = CountTally(s.name, "step_law", law, alpha=ctx.spend(_INTEGRATED), sequential=looks,
                                         resolution=tv,
                                         describe=emitted_namer(pool, s.vocab_size, s.gamma, self.outcomes))
            self.integrated.method = "integrated step law (context, emitted string)"
        if _CONTEXT_COUNTS in ctx.planned:
            law = first_token_law(ctx.backend.law_model(s.target), self.caller.pool)
            self.context_counts = CountTally(
                s.name, "first_token", law.reshape(-1) / law.shape[0], alpha=ctx.spend(_CONTEXT_COUNTS),
                sequential=looks, resolution=tv, describe=ContextTokenName(int(s.vocab_size)))
            self.context_counts.method = "first token counts per prompt context (token-level, no PIT)"
        self.pit_rng = np.random.default_rng(ctx.rng.integers(2**63))

    @property
    def rejected_early(self) -> bool:
        return any(t.rejected_early for t in self.tallies.values()) or any(
            t is not None and t.rejected_early for t in (self.integrated, self.context_counts))

    def _count_first(self, codes, *, flush: bool = False) -> None:
        """Buffer first-token codes; count them once :data:`COUNT_BUFFER` are waiting (or on ``flush``)."""
        if codes is not None:
            self.buffered.append(codes)
        waiting = sum(int(c.shape[0]) for c in self.buffered)
        if self.buffered and (flush or waiting >= COUNT_BUFFER):
            self.context_counts.add_codes(concat(self.buffered))
            self.buffered = []

    def absorb(self, step) -> bool:
        """Test one call's outputs (the first token's law and the integrated law on fresh drafts only)."""
        ctx, s, counts = self.ctx, self.ctx.scenario, self.counts
        block, parsed, outcome, host = step.block, step.parsed, step.outcome, step.host
        uniforms = self.pit_rng.random if host else ctx.backend.uniforms(int(self.pit_rng.integers(2**63)))
        tallies = self.tallies
        try:
            if "first_token" in tallies and step.fresh:
                first = step.out[:, 0] if host else step.out[:, 0].long()
                tallies["first_token"].add_uniforms(block.pit_first(first, uniforms(first.shape[0])),
                                                    categories=first, expected=block.first_expected)
            if self.context_counts is not None and step.fresh:
                first = step.out[:, 0] if host else step.out[:, 0].long()
                contexts = block.draw.pool_index if host else ctx.backend.to_device(block.draw.pool_index)
                if bool((first >= 0).all()):
                    self._count_first(contexts * s.vocab_size + first)
            if "stop_conditional" in tallies:
                if host and not counts.bonus_missing:  # every row so far has a final token: no subset
                    has, final = None, parsed.final
                else:
                    has = np.flatnonzero(parsed.final >= 0) if host else (parsed.final >= 0).nonzero()[:, 0]
                    final = parsed.final[has]
                tallies["stop_conditional"].add_uniforms(block.pit_final(outcome, has, uniforms(final.shape[0])),
                                                         categories=final, expected=block.final_expected)
            if "accepted_count" in tallies:
                tallies["accepted_count"].add_uniforms(block.pit_count(outcome, uniforms(parsed.accepted.shape[0])),
                                                       categories=parsed.accepted, expected=block.count_expected)
            if "step_law" in tallies and not counts.bonus_missing:
                codes = parsed.accepted * s.vocab_size + parsed.final
                tallies["step_law"].add_uniforms(block.pit_step(outcome, uniforms(codes.shape[0])),
                                                 categories=codes, expected=block.step_expected)
        except ValueError as exc:  # a sample on a zero-probability outcome
            ctx.recorder.failure("impossible", f"an output has probability zero under the exact law: {exc}", stop=True)
            return False
        if self.integrated is not None and step.fresh and not counts.bonus_missing:
            draw = block.draw  # the device copy shares the host block's draw
            if host:
                self.integrated.add_codes(draw.pool_index * self.outcomes + encode_emitted(step.out, s.vocab_size))
            else:
                codes = ctx.backend.encode_on_device(step.out, s.vocab_size)
                self.integrated.add_codes(ctx.backend.to_device(draw.pool_index) * self.outcomes + codes)
        return True

    def evidence(self) -> dict:
        """The tallies, as one shard of the scenario hands them to the driver (:meth:`adopt` takes them back)."""
        if self.context_counts is not None:
            self._count_first(None, flush=True)
        return {"pit": dict(self.tallies), "integrated": self.integrated, "context_counts": self.context_counts}

    def adopt(self, evidence: dict) -> None:
        """Take the tallies merged over a scenario's shards (then :meth:`finish` records them)."""
        self.tallies, self.integrated = dict(evidence["pit"]), evidence["integrated"]
        self.context_counts = evidence["context_counts"]

    def finish(self) -> None:
        ctx = self.ctx
        if self.context_counts is not None:
            self._count_first(None, flush=True)
        if self.counts.bonus_missing and "step_law" in self.tallies:
            del self.tallies["step_law"]
            ctx.recorder.skipped("step_law", "the verifier omits the bonus token, so (k, y) is undefined for k = gamma")
        if self.counts.bonus_missing and self.integrated is not None:
            self.integrated = None
            ctx.recorder.skipped("step_law", "integrated step law skipped: the bonus token is missing")
        records = [t.record() for t in self.tallies.values()]
        records += [t.record() for t in (self.integrated, self.context_counts) if t is not None]
        ctx.recorder.records += records


def cells_per_call(scenario) -> int:
    """Probability cells one call of ``scenario`` hands over: rows x (gamma draft + gamma + 1 target rows) x V."""
    return scenario.rows_per_call * (2 * scenario.gamma + 1) * scenario.vocab_size
