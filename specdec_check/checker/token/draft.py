"""The draft's own sampler against the q it hands the verifier.

Speculative decoding is exact only if each draft token is a sample of the very law ``q`` the verifier is given
(Leviathan et al. 2023, Algorithm 1 takes ``x ~ q`` and divides by ``q(x)``). A drafter that samples from one
law and reports another breaks it silently: drafts sampled from bf16 logits while the verifier gets float32
probabilities (deepseek-ai/DeepSpec #31: about 1e-3 TV at temperature 1, 0.1 at temperature 0.3 with logits of
magnitude ~60), or drafts sampled from processed logits while the raw softmax is returned (transformers
#47932). :func:`check_draft_consistency` calls ``sample_draft(*, logits, <steps>, generator)`` and tests each
emitted token against the q row returned with it: the randomized PIT of the token under its own q row is
exactly uniform when the token is a sample of q (Brockwell 2007), whatever q is; where the returned rows of a
scenario row are the same on every call, the (row, token) counts are also tested against them cell by cell.
"""

from __future__ import annotations

import numpy as np

from ..._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED
from ...exact._token_law import TokenProcessing
from ...scenarios._token import TokenScenario, default_draft_battery
from ..checks.base import Check
from ..checks.randomness import Determinism
from ..core.api import run_check
from ..core.kind import PlannedTest
from ..core.planning import planned_samples
from ..core.tally import CountTally, PitTally
from .caller import TokenCaller
from .kind import TokenKind
from .laws import TokenStep

__all__ = ["DRAFT_CHECKS", "DRAFT_PROCESSING", "DraftKind", "check_draft_consistency"]

DRAFT_CHECKS = ("contract", "impossible", "draft_law", "determinism")
#: A drafter's sampler by default: logits and a temperature per output (0 = greedy).
DRAFT_PROCESSING = TokenProcessing(inputs="logits", order=("temperature",))
#: Largest deviation between two returned q rows of the same scenario row still read as "the same law"
#: (float32 softmaxes of the same logits agree to ~1e-7); beyond it only the PIT test runs.
SAME_Q = 1e-6


class DraftStep(TokenStep):
    """One call's outputs with the q rows returned beside them (float64 [B, V] on the host)."""

    def __init__(self, rows, tokens, q):
        super().__init__(rows, tokens)
        self.q = q


class DraftCaller(TokenCaller):
    """Calls a drafter's sampler; its output is ``(tokens [B], q [B, V])``, or tokens alone with ``draft_law``."""

    def __init__(self, ctx, sample, draft_law=None):
        super().__init__(ctx, sample)
        self.draft_law = draft_law

    def _parse_pair(self, out, kwargs, count):
        vocab = self.scenario.vocab_size
        if self.draft_law is None:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                return (f"the draft sampler returned {type(out).__name__}; it must return (draft_token_ids [B], "
                        "draft_probs [B, V]) (or pass draft_law=)", {}), None
            tokens, q = out
        else:
            tokens, q = out, self.draft_law(**kwargs)
        try:
            tokens, q = np.array(self.backend.to_host(tokens)), np.array(self.backend.to_host(q), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - whatever came back, it is not a pair of arrays
            return (f"the draft sampler's output could not be read as (tokens, q) arrays: {exc}", {}), None
        problem, tokens = self._parse(tokens, count)
        if problem is not None:
            return problem, None
        if q.shape != (count, vocab):
            return (f"the returned q has shape {q.shape}, not [B, V] = ({count}, {vocab})", {}), None
        if not (np.isfinite(q).all() and (q >= 0).all() and (q.sum(axis=1) > 0).all()):
            return ("the returned q holds a negative, NaN or infinite entry, or a row without mass", {}), None
        return None, (tokens, q / q.sum(axis=1, keepdims=True))

    def call(self, draw, seed, check="contract"):
        count = int(draw.rows.shape[0])
        kwargs = self.inputs(draw)
        plain = {k: v for k, v in kwargs.items()}

        def parse(out):
            return self._parse_pair(out, plain, count)

        out, parsed = self.guard.call(kwargs, seed, check=check, parse=parse, raw_output=True)
        return (None, None) if out is None else (parsed[0], parsed)

    def call_host(self, draw, seed, check="contract"):
        tokens = self.call(draw, seed, check)[0]
        return None if tokens is None else tokens[:, None]


class DraftLawCheck(Check):
    """Each token against the q row returned with it (see the module docstring)."""

    power = ("the randomized PIT of every token under its own returned q row, in the mode's bins, and where q is "
             "the same on every call, an identity test over (row, token) cells; sized by samples_for(design TV, "
             "cells, alpha share), capped by the mode")

    @classmethod
    def plan(cls, scenario, options) -> list:
        return [PlannedTest("draft_pit", "draft_law"), PlannedTest("draft_cells", "draft_law")] \
            if "draft_law" in options.checks else []

    def start(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        self.pit = None
        if "draft_pit" not in ctx.planned:
            return
        self.pit = PitTally(s.name, "draft_law", bins=ctx.mode.pit_bins, alpha=ctx.spend("draft_pit"),
                            resolution=ctx.mode.design_tv)
        self.cells_alpha = ctx.spend("draft_cells")
        self.rng = np.random.default_rng(ctx.rng.integers(2**63))
        self.first_q = np.full((s.rows, s.vocab_size), np.nan)
        self.deviation = 0.0
        self.counts_rt = np.zeros((s.rows, s.vocab_size), dtype=np.int64)

    def calls_planned(self) -> int:
        ctx, s, mode = self.ctx, self.ctx.scenario, self.ctx.mode
        if self.pit is None:
            return 4
        need = min(planned_samples(mode.design_tv, min(s.rows * s.vocab_size, 1 << 16), self.pit.alpha / 2),
                   mode.max_samples)
        per_call = s.outputs_per_call()
        by_cells = int(mode.max_law_cells // max(1, 2 * per_call * s.vocab_size))  # logits in, q back
        return int(max(1, min(-(-need // per_call), mode.max_law_calls, by_cells)))

    def absorb(self, step) -> bool:
        rows, tokens, q = step.rows, step.tokens, step.q
        mass = q[np.arange(tokens.size), tokens]
        if (mass <= 0).any():
            i = int(np.flatnonzero(mass <= 0)[0])
            self.ctx.recorder.failure(
                "impossible", f"{int((mass <= 0).sum()):,} draft token(s) have probability zero under the q returned "
                f"for the verifier; first: output {i} drew token {int(tokens[i])} from "
                f"{self.ctx.scenario.describe_row(int(rows[i]))}", {"event": "outside_returned_q", "output": i,
                                                                     "token": int(tokens[i])}, stop=True)
            return False
        if self.pit is None:
            return True
        below = np.cumsum(q, axis=1)[np.arange(tokens.size), tokens] - mass
        self.pit.add_uniforms(np.clip(below + self.rng.random(tokens.size) * mass, 0.0, 1.0 - 1e-16))
        fresh = np.isnan(self.first_q[rows, 0])
        if fresh.any():
            first_rows, at = np.unique(rows[fresh], return_index=True)
            self.first_q[first_rows] = q[np.flatnonzero(fresh)[at]]
        self.deviation = max(self.deviation, float(np.abs(q - self.first_q[rows]).max()))
        np.add.at(self.counts_rt, (rows, tokens), 1)
        return True

    @property
    def rejected_early(self) -> bool:
        return self.pit is not None and self.pit.rejected_early

    def finish(self) -> None:
        if self.pit is None:
            return
        recorder = self.ctx.recorder
        records = [self.pit.record(extra_details={"law": "the q returned with each token"})]
        seen = ~np.isnan(self.first_q[:, 0])
        if self.deviation <= SAME_Q and seen.any():
            n_rows = self.counts_rt[seen].sum(axis=1)
            law = (self.first_q[seen] * (n_rows / n_rows.sum())[:, None]).reshape(-1)
            cells = CountTally(self.ctx.scenario.name, "draft_law", law, alpha=self.cells_alpha, sequential=False)
            cells.add_counts(self.counts_rt[seen].reshape(-1))
            records.append(cells.record(extra_details={"law": "(row, token) counts against the returned q, given "
                                                              "each row's count"}))
        for rec in records:
            recorder.record(rec)
            if not rec.passed:
                recorder.failure("draft_law", f"the draft tokens are not samples of the q handed to the verifier "
                                 f"({rec.details['law']}): p = {rec.pvalue:.3g}, plug-in TV {rec.tv_plugin:.3g} over "
                                 f"{rec.n:,} tokens: the drafter samples from one law and reports another",
                                 {"pvalue": rec.pvalue, "n": rec.n, "worst_cells": rec.details.get("worst_cells", [])})


class DraftKind(TokenKind):
    """A drafter's sampler checked against the q it returns (see the module docstring)."""

    name = "draft_sampler"
    role = "draft sampler"
    checks = DRAFT_CHECKS
    has_command = False
    option_kind = "token_sampler"  # the same options as a token sampler's
    api_function = "check_draft_consistency"
    #: Run whole: the drafter's law check keeps each row's first q and its (row, token) counts, which do not merge
    #: across shards (as a split token scenario's tallies do). Inherited from the token kind, default mode split
    #: a drafter scenario into 19 shards its plan did not make, and the run raised.
    splittable = False

    def __init__(self, processing: TokenProcessing = DRAFT_PROCESSING, draft_law=None):
        super().__init__(processing)
        self.draft_law = draft_law

    def arguments(self) -> tuple:
        return (self.processing, self.draft_law)

    def default_battery(self) -> list:
        return default_draft_battery(self.processing)

    def check_classes(self, ctx) -> tuple:
        return (DraftLawCheck, Determinism)

    def check_classes_for(self, scenario, options) -> tuple:
        return (DraftLawCheck, Determinism)

    def caller(self, ctx, sampler) -> DraftCaller:
        return DraftCaller(ctx, sampler, self.draft_law)

    def step(self, ctx, caller, counts, block, outputs):
        tokens, q = outputs[0][1]
        return DraftStep(block.rows, tokens, q)


def check_draft_consistency(sample_draft, draft_law=None, *, scenarios=None, mode=DEFAULT_MODE,
                            backend=DEFAULT_BACKEND, seed=DEFAULT_SEED, alpha=DEFAULT_ALPHA, progress=None,
                            checks=None, device=None, dtype=None, processing=None, strict=False, monitor=None,
                            executor=None):
    """Check that a drafter's tokens are samples of the q it hands the verifier (see the module docstring).

    ``sample_draft(*, logits, temperature, generator)`` (the steps of ``processing``, default
    logits -> temperature) returns ``(draft_token_ids [B], draft_probs [B, V])``; or, with ``draft_law``, the
    tokens alone, and ``draft_law(*, logits, temperature)`` returns the q rows the verifier is given. The
    default scenarios (:func:`~specdec_check.scenarios.default_draft_battery`) hand float32 logits of
    realistic magnitude at temperatures 0.3 and 1 (where a bf16 sampling path shows) and generic rows. Modes
    as for :func:`check_token_sampler` (design TV 1e-3 in default mode).
    """
    if processing is not None and not isinstance(processing, TokenProcessing):
        raise TypeError(f"processing must be a TokenProcessing; got {type(processing).__name__}.")
    if draft_law is not None and not callable(draft_law):
        raise TypeError(f"draft_law must be None or a callable returning q [B, V]; got {type(draft_law).__name__}.")
    keywords = dict(locals(), name=None)
    kind = DraftKind(processing or getattr(sample_draft, "processing", None) or DRAFT_PROCESSING, draft_law)
    return run_check(kind, sample_draft, {k: v for k, v in keywords.items()
                                          if k not in ("sample_draft", "draft_law", "processing")})
