"""The law tests of a token sampler: every output against its row's exact processed law.

Outputs are drawn from rows chosen uniformly at random, so the (row, token) pairs of the rows whose law is
determined are multinomial with probability ``law[r, t] / R`` (R: those rows): counted per cell where the
supports hold at most :data:`COUNT_CELLS` cells, an exact identity test with an e-process watching it
(Lindon & Malek 2022); otherwise each output's randomized PIT under its row's law (Brockwell 2007) in equal
bins. An output outside its row's support (every reading of its boundaries gives it probability 0) is an
impossible event: a failure at once, whatever the sample size.
"""

from __future__ import annotations

import numpy as np

from ..checks.base import Check
from ..core.kind import PlannedTest
from ..core.planning import planned_samples
from ..core.tally import CountTally, PitTally

__all__ = ["COUNT_CELLS", "TokenLawCheck", "TokenStep"]

#: Largest support (cells of positive probability over the determined rows) counted per cell: the identity
#: test's sqrt(cells) / eps^2 rate makes more cells cost samples the PIT does not need, and a bincount per
#: call over them grows with the cells.
COUNT_CELLS = 1 << 16
#: Samples planned beyond the uniform law's plan on as many cells: the skewed laws of the battery need up to
#: 1.14x what a uniform law does (samples_for(probs=...) on min-p-boundary, 9 cells; it costs seconds per law
#: to compute, the uniform plan is memoised), and a plan that falls short leaves the scenario inconclusive.
PLAN_MARGIN = 1.25
#: Outputs per unit of the design TV a support-only scenario draws: ln(1e8), so a token outside the support
#: that the kernel emits with probability at least the design TV is seen with probability 1 - 1e-8.
SUPPORT_SIGHTINGS = 18.42
#: Codes of an output that is not counted in a cell: a token of an undetermined row's support, a token outside
#: its row's support (an impossible event).
UNCOUNTED, OUTSIDE = -1, -2


class TokenStep:
    """One call's outputs: ``rows`` [B] (the scenario row of each output) and ``tokens`` [B]."""

    def __init__(self, rows, tokens):
        self.rows, self.tokens = rows, tokens


class CellName:
    """How a cell of a token law reads in a report (picklable)."""

    def __init__(self, rows, tokens, describe_row):
        self.rows, self.tokens, self.describe_row = rows, tokens, describe_row

    def __call__(self, code) -> str:
        return f"token {int(self.tokens[code])} of {self.describe_row(int(self.rows[code]))}"


def support_cells(laws) -> tuple:
    """``(cell_of [R, V] int64, probs [C])``: the cell index of each (row, token) of positive probability in a
    determined row (-1 elsewhere), and each cell's probability under a uniformly chosen determined row."""
    determined = ~laws.ambiguous
    positive = (laws.law > 0) & determined[:, None]
    cell_of = np.full(laws.law.shape, -1, dtype=np.int64)
    cell_of[positive] = np.arange(int(positive.sum()))
    rows = max(1, int(determined.sum()))
    return cell_of, laws.law[positive] / rows


class TokenLawCheck(Check):
    """Impossible outputs, then the law of the determined rows' outputs (see the module docstring)."""

    power = ("an identity test over the (row, token) cells of the determined rows (or their randomized PIT in "
             "the mode's bins past 65,536 cells), sized by samples_for(design TV, cells, alpha share) and capped "
             "by the mode; its record states the smallest TV it could detect with power 0.99")
    merged = True

    @classmethod
    def plan(cls, scenario, options) -> list:
        return [PlannedTest("token_law", "token_law")] if "token_law" in options.checks else []

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.tally = None
        from .caller import RoundTo

        self.laws = ctx.scenario.laws(RoundTo(ctx.backend))  # memoised per scenario and backend dtype

    def start(self, spend: bool = True) -> None:
        """Build the law test (``spend=False``: the plan only, as :meth:`TokenKind.law_plan` asks)."""
        ctx, s = self.ctx, self.ctx.scenario
        laws = self.laws
        self.cell_of, probs = support_cells(laws)
        self.determined = ~laws.ambiguous
        self.counts.ambiguous_rows = int(laws.ambiguous.sum())
        self.support = probs.size
        # One gather per output: its cell (>= 0), a token of an undetermined row's support (UNCOUNTED), or a
        # token outside its row's support (OUTSIDE).
        codes = np.where(laws.support, UNCOUNTED, OUTSIDE).astype(np.int32 if probs.size < 2**31 else np.int64)
        counted = self.cell_of >= 0
        codes[counted] = self.cell_of[counted]
        self.code_of = codes.ravel()
        self.vocab = laws.law.shape[1]
        if "token_law" not in ctx.planned or probs.size < 2:
            return  # no determined row, or one outcome in all: the support check is the whole test
        alpha = ctx.spend("token_law") if spend else ctx.ledger.per_check
        if probs.size <= COUNT_CELLS:
            rows, tokens = np.nonzero(self.cell_of >= 0)
            self.tally = CountTally(s.name, "token_law", probs, alpha=alpha, resolution=ctx.mode.design_tv,
                                    describe=CellName(rows, tokens, s.describe_row))
        else:
            self.tally = PitTally(s.name, "token_law", bins=ctx.mode.pit_bins, alpha=alpha,
                                  resolution=ctx.mode.design_tv)
            cdf = np.cumsum(laws.law, axis=1)
            self.below = (cdf - laws.law).ravel()  # mass of the tokens before each token, per (row, token)
            self.mass = np.ascontiguousarray(laws.law).ravel()
            self.pit_rng = np.random.default_rng(ctx.rng.integers(2**63))
            self.support = ctx.mode.pit_bins

    def calls_planned(self) -> int:
        """Calls until the law test can detect the design TV, within the mode's caps."""
        ctx, s, mode = self.ctx, self.ctx.scenario, self.ctx.mode
        if self.tally is None:  # the support is the test: see an impossible token of mass >= the design TV
            need = SUPPORT_SIGHTINGS / mode.design_tv
            return int(max(1, min(mode.max_law_calls, -(-int(need) // s.outputs_per_call()))))
        need = min(PLAN_MARGIN * planned_samples(mode.design_tv, int(self.support), self.tally.alpha / 2),
                   mode.max_samples)
        per_call = s.outputs_per_call()
        # outputs of determined rows are what the test counts: a call's share of them is R_det / R
        share = self.determined.sum() / s.rows
        calls = -(-int(need / share) // per_call)
        by_cells = int(mode.max_law_cells // max(1, s.calls_cells(per_call)))
        return int(max(1, min(calls, mode.max_law_calls, by_cells)))

    def absorb(self, step) -> bool:
        rows, tokens = step.rows, step.tokens
        flat = rows * self.vocab + tokens
        codes = self.code_of.take(flat)
        self.counts.outputs += int(rows.size)
        if rows.size and codes.min() == OUTSIDE:
            outside = codes == OUTSIDE
            self._impossible(int(np.flatnonzero(outside)[0]), rows, tokens, int(outside.sum()))
            return False
        if self.tally is None:
            return True
        if self.counts.ambiguous_rows:
            keep = codes != UNCOUNTED
            flat, codes = flat[keep], codes[keep]
        if isinstance(self.tally, PitTally):
            below, mass = self.below.take(flat), self.mass.take(flat)
            u = (below + self.pit_rng.random(flat.size) * mass).clip(0.0, 1.0 - 1e-16)
            self.tally.add_uniforms(u)
        else:
            self.tally.add_codes(codes)
        return True

    def _impossible(self, i, rows, tokens, count) -> None:
        s, laws = self.ctx.scenario, self.laws
        r, t = int(rows[i]), int(tokens[i])
        kept = np.flatnonzero(laws.support[r])
        shown = kept[:8].tolist() + (["..."] if kept.size > 8 else [])
        self.ctx.recorder.failure(
            "impossible", f"{count:,} output(s) emitted a token its processed law gives probability zero; first: "
            f"output {i} drew token {t} from {s.describe_row(r)}, whose law keeps {kept.size} token(s): {shown}",
            {"event": "outside_support", "output": i, "row": r, "token": t, "count": count,
             "kept": kept[:64].tolist()}, stop=True)

    @property
    def rejected_early(self) -> bool:
        return self.tally is not None and self.tally.rejected_early

    def evidence(self):
        """The tally, as one shard of a split scenario hands it to the driver (:meth:`adopt` takes it back)."""
        return self.tally

    def adopt(self, evidence) -> None:
        """Take the tally merged over the scenario's shards (then :meth:`finish` records it)."""
        self.tally = evidence
        self.start(spend=False)  # the tables finish reads, without a second alpha share
        self.tally = evidence

    def _support_only(self) -> None:
        """The record of a scenario whose law is its support: one outcome in all (exact: nothing can deviate
        but an impossible output), or every row's law left to the kernel by the declared rules."""
        ctx, laws = self.ctx, self.laws
        if "token_law" not in ctx.planned or ctx.stopped or not self.counts.outputs:
            return
        if self.determined.any():
            method, tv = "exact: one outcome of positive probability in all, so the support check is the law test", 0.0
        else:
            reasons = "; ".join(sorted({r for r in laws.reasons if r}))
            method, tv = f"support only: every row's law is left to the kernel by the declared rules ({reasons})", None
        from ..core.report import TestRecord

        ctx.recorder.record(TestRecord(ctx.scenario.name, "token_law", method, True, 0.0, self.counts.outputs,
                                       min_detectable_tv=tv, details={"ambiguous_rows": self.counts.ambiguous_rows}))

    def finish(self) -> None:
        if self.tally is None:
            self._support_only()
            return
        rec = self.tally.record(extra_details={"ambiguous_rows": self.counts.ambiguous_rows})
        self.ctx.recorder.record(rec)
        if not rec.passed:
            from ..core.tally import law_evidence

            self.ctx.recorder.failure(
                "token_law", f"the tokens' law differs from the exact processed law: p = {rec.pvalue:.3g}"
                + (f", e-value {rec.evalue:.3g}" if rec.evalue is not None else "")
                + f", plug-in TV {rec.tv_plugin:.3g} over {rec.n:,} outputs" + law_evidence(rec),
                {"pvalue": rec.pvalue, "n": rec.n, "worst_cells": rec.details.get("worst_cells", [])})
