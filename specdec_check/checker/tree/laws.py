"""The output-law tests of a tree-verifier scenario, and the events of probability zero under its rule.

Per-row laws go through randomized PITs (:class:`~specdec_check.checker.tree.block.TreeBlock`),
so they are tested at any vocabulary and tree size; the emitted string's law integrated over
drafting and prompts is counted directly where it can be enumerated
(:func:`specdec_check.exact.tree_sequence_law`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...exact import encode_emitted, num_step_outcomes
from ..checks.base import Check
from ..core.kind import PlannedTest
from ..core.planning import planned_samples
from ..core.tally import CountTally, PitTally
from .contract import EVIDENCE_ROWS, describe_impossible, impossible_rows

__all__ = ["TreeCounts", "TreeLawChecks", "tree_cells_per_call", "tree_impossible"]

#: The per-row PIT tests that are not per position, in the order their tallies are made.
_PIT_TESTS = ("first_token", "accepted_length", "final_token")
#: The test of the emitted string's law integrated over drafting (owned by the ``sequence_law`` check).
INTEGRATED = "sequence_law_integrated"


def tree_cells_per_call(scenario) -> int:
    """Probability cells one call hands over: rows x (N + 1 draft + N + 1 target rows) x V."""
    return scenario.rows_per_call * 2 * (scenario.nodes + 1) * scenario.vocab_size


def _position(t: int) -> str:
    return f"sequence_law[{t}]"


class TreeCounts:
    """Accepted and emitted tokens of every located call against the exact expectations, and the
    efficiency test's trials (rows that accepted at least one node, each with its exact probability)."""

    def __init__(self):
        self.accepted_total = 0.0
        self.accepted_expected = 0.0
        self.emitted_total = 0
        self.any_accepted = 0
        self.any_probs: list = []

    def add(self, block, parsed) -> None:
        self.accepted_total += float(parsed.accepted.sum())
        self.accepted_expected += block.expected_accepted
        self.emitted_total += int(parsed.length.sum())
        self.any_accepted += int((parsed.accepted > 0).sum())
        self.any_probs.append(block.accept_any)

    def probs(self) -> np.ndarray:
        return np.concatenate(self.any_probs) if self.any_probs else np.zeros(0)

    def merge(self, later: "TreeCounts") -> "TreeCounts":
        """Add a later shard's counts (sums, and its rows' acceptance probabilities after these); returns self."""
        for name in ("accepted_total", "accepted_expected", "emitted_total", "any_accepted"):
            setattr(self, name, getattr(self, name) + getattr(later, name))
        self.any_probs += later.any_probs
        return self


def _rule_name(block) -> str:
    return getattr(block.rule, "name", block.rule)


def tree_impossible(ctx, block, out, parsed) -> bool:
    """Check one call for emissions of probability zero under the rule; False after a finding that stops
    the scenario (:func:`~specdec_check.checker.tree.contract.impossible_rows`). Under ``rule="any"`` an
    emission only the reference rule rules out is a ``"nonstandard"`` finding, once per scenario, and the
    scenario goes on."""
    if not ctx.selected("impossible"):
        return True
    tolerance, rule, recorder = ctx.backend.tolerance, ctx.options.rule, ctx.recorder
    bad, universal, standard = impossible_rows(block, out, parsed, tolerance=tolerance, rule=rule)
    if rule == "any":
        standard_only = standard & ~universal
        if standard_only.any() and not recorder.has("nonstandard", check="impossible"):
            row = int(np.flatnonzero(standard_only)[0])
            recorder.information("impossible", f"not the {_rule_name(block)} reference rule (information under "
                                 f"rule='any'): row {row} {describe_impossible(block, out, parsed, row, tolerance)}",
                                 {"event": "outside_reference_support", "row": row, "output": out[row].tolist(),
                                  "drafts": block.draw.draft_token_ids[row].tolist(),
                                  "parents": block.draw.parents[row].tolist(), "count": int(standard_only.sum())})
    if not bad.any():
        return True
    idx = np.flatnonzero(bad)
    row = int(idx[0])
    reason = describe_impossible(block, out, parsed, row, tolerance if not universal[row] else 1.0)
    under = "every lossless rule" if rule == "any" else f"the {_rule_name(block)} rule"
    recorder.failure("impossible", f"{idx.size} row(s) emitted a string of probability zero under {under}; "
                     f"first: row {row} {reason}",
                     {"rows": idx[:EVIDENCE_ROWS].tolist(), "count": int(idx.size), "row": row,
                      "output": out[row].tolist(), "drafts": block.draw.draft_token_ids[row].tolist(),
                      "parents": block.draw.parents[row].tolist(), "tolerance": tolerance}, stop=True)
    return False


@dataclass(frozen=True)
class TreeOutcomeName:
    """How the outcomes a per-row tree test sees read in a report (the PIT bins' tokens); picklable, so a
    tally carrying it travels from a shard's worker to the driver."""

    test: str

    def __call__(self, code) -> str:
        if self.test == "accepted_length":
            return f"{code} token(s) emitted"
        if self.test == "final_token":
            return f"final token {code}"
        return f"token {code}"


def _outcome_namer(test: str) -> TreeOutcomeName:
    return TreeOutcomeName(test)


class TreeLawChecks(Check):
    """The first token against target row 0; the accepted length, the final token given the stop class
    and every position of the emitted sequence against their exact laws given the tree; the emitted
    string integrated over drafting where enumerable.

    Each test spends its alpha share half on a Lindon & Malek (2022) e-process watched as samples grow
    and half on the exact fixed-n identity test at the end (:mod:`specdec_check.checker.core.tally`).
    """

    power = ("each PIT test is sized by samples_for(design TV, pit bins, alpha share) and capped by the mode; "
             "its record states the smallest TV it could detect with power 0.99")

    @classmethod
    def plan(cls, scenario, selection, drafting) -> list:
        tests = [PlannedTest(name, name) for name in _PIT_TESTS if name in selection]
        if "sequence_law" in selection:
            tests += [PlannedTest(_position(t), "sequence_law") for t in range(1, scenario.depth + 1)]
            if scenario.enumerable(drafting):
                tests.append(PlannedTest(INTEGRATED, "sequence_law"))
        return tests

    merged = True

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.drafting = ctx.kind.drafting
        self.tallies, self.integrated, self.outcomes = {}, None, 0
        self.pit_rng = None

    def calls_needed(self) -> int:
        """Calls until a per-row PIT test can detect the design TV (one sample per row; the loop's caps apply
        on top: :meth:`specdec_check.checker.tree.kind.TreeKind.law_budget`)."""
        s, mode = self.ctx.scenario, self.ctx.mode
        n_target = min(planned_samples(mode.design_tv, mode.pit_bins, self.ctx.ledger.per_check / 2), mode.max_samples)
        return -(-n_target // s.rows_per_call)

    def start(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        looks = not ctx.part  # a later shard's tallies only count: it cannot see the e-process before it
        tv = ctx.mode.design_tv  # the e-process keeps its power down to the design TV
        for test in ctx.plan.tests:
            if test.name in _PIT_TESTS or test.check == "sequence_law" and test.name != INTEGRATED:
                self.tallies[test.name] = PitTally(s.name, test.check, bins=ctx.mode.pit_bins,
                                                   alpha=ctx.spend(test.name), sequential=looks, resolution=tv,
                                                   describe=_outcome_namer(test.name))
        if INTEGRATED in ctx.planned:
            law = s.integrated_law(self.drafting, self.caller.rule, law_model=ctx.backend.law_model)
            self.integrated = CountTally(s.name, "sequence_law", law, alpha=ctx.spend(INTEGRATED), sequential=looks,
                                         resolution=tv)
            self.integrated.method = "integrated sequence law (prompt, emitted string)"
            self.outcomes = num_step_outcomes(s.vocab_size, s.depth)
        self.pit_rng = np.random.default_rng(ctx.rng.integers(2**63))

    @property
    def rejected_early(self) -> bool:
        return any(t.rejected_early for t in self.tallies.values()) or (
            self.integrated is not None and self.integrated.rejected_early)

    def absorb(self, step) -> bool:
        block, out, parsed, fresh = step.block, step.out, step.parsed, step.fresh
        ctx, uniforms = self.ctx, self.pit_rng.random
        tallies = self.tallies
        try:
            if "first_token" in tallies and fresh:
                tallies["first_token"].add_uniforms(block.pit_first(out, uniforms(out.shape[0])), categories=out[:, 0])
            if "accepted_length" in tallies:
                tallies["accepted_length"].add_uniforms(block.pit_length(parsed, uniforms(out.shape[0])),
                                                        categories=parsed.length)
            if "final_token" in tallies:
                tallies["final_token"].add_uniforms(block.pit_final(parsed, uniforms(out.shape[0])),
                                                    categories=parsed.final)
            for t in range(1, out.shape[1]):
                tally = tallies.get(_position(t))
                if tally is not None:
                    rows, u = block.pit_position(out, parsed, t, uniforms)
                    if rows.size:
                        tally.add_uniforms(u)
        except ValueError as exc:  # a sample on a zero-probability outcome
            ctx.recorder.failure("impossible", f"an output has probability zero under the exact law: {exc}", stop=True)
            return False
        if self.integrated is not None and fresh:
            codes = encode_emitted(out, ctx.scenario.vocab_size)
            self.integrated.add_codes(block.draw.pool_index * self.outcomes + codes)
        return True

    def evidence(self) -> dict:
        """The tallies, as one shard of the scenario hands them to the driver (:meth:`adopt` takes them back)."""
        return {"pit": dict(self.tallies), "integrated": self.integrated}

    def adopt(self, evidence: dict) -> None:
        """Take the tallies merged over a scenario's shards (then :meth:`finish` records them)."""
        self.tallies, self.integrated = dict(evidence["pit"]), evidence["integrated"]

    def finish(self) -> None:
        records = [t.record() for t in self.tallies.values()]
        if self.integrated is not None:
            records.append(self.integrated.record())
        for rec, name in zip(records, list(self.tallies) + ([INTEGRATED] if self.integrated is not None else [])):
            rec.details["test"] = name
        self.ctx.recorder.records += records
