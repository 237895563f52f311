"""The law tests of a ragged scenario's random requests, attributed to requests.

Each random request of a call is one row of a chain verifier with its own number of drafts
(:class:`~specdec_check.checker.ragged.block.RaggedBlock`), so its outputs go through the chain's
randomized PITs (Brockwell 2007) against its processed laws: the first token against target row 0
(fresh draws only), the final token given the stop position, the accepted count, and the joint
(k, y) given the drafted path (Leviathan et al. 2023, Theorem 3.5). The PITs of every random
request of the scenario feed one tally per test (one alpha share each); each tally also keeps
per-request bin counts, so a rejected test names the request whose outputs differ most (a
descriptive chi-square per request, not a further test). Events of probability zero are checked
on every call and name their request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..chain.contract import ParsedStep, dropped_final, impossible_events
from ..chain.counts import Step, StepCounts
from ..chain.laws import PATH_LAW_MAX_VOCAB
from ..checks.base import Check
from ..core.kind import PlannedTest
from ..core.planning import planned_samples
from ..core.tally import PitTally

__all__ = ["RaggedCounts", "RaggedLaws", "RaggedStep", "RequestCounts", "RequestPitTally", "ragged_calls_budget", "ragged_calls_planned",
           "ragged_reuse"]

#: The ragged law tests, in the order their tallies are made.
_PIT_TESTS = ("first_token", "stop_conditional", "accepted_count", "step_law")
#: A ragged scenario with law tests draws at most the mode's cells (the V = 1,000 call, ~170k cells,
#: then gets the calls its law tests need to reach the mode's resolution: ~120 in quick mode, ~600 in
#: default mode); one without (production vocabularies) draws at most a tenth of them: drawing a
#: call there costs ~100x a chain call per cell (fresh logits per row with a sort for the boundary
#: margins, a drafter's law per draft, the sampler's own top-k/top-p sorts), and its checks need
#: calls, not samples.
RAGGED_CELL_SHARE = 1
LAWLESS_CELL_SHARE = 10
#: A drawn call serves ``cells // RAGGED_REUSE_CELLS`` calls (at most MAX_REUSE): from V = 1,000
#: upwards a draw costs more than the call; the laws of a reused call are conditional on its drafts,
#: so they stay exact (the first-token law counts fresh draws only).
RAGGED_REUSE_CELLS = 1 << 15
MAX_REUSE = 16
#: A scenario without law tests (no random requests, or ``law_tests`` off) runs a quarter of the mode's calls.
GREEDY_CALL_SHARE = 4
#: Samples planned beyond samples_for's count: the plan is for a uniform law at the planning alpha, and a
#: record's achieved resolution comes out up to ~0.1% above the design TV at exactly that count (measured:
#: 0.06005 at the planned 9,039 on ragged-mixed-v7 alone); 3% more samples reach it with room.
PLANNING_MARGIN = 1.03
#: Requests named in a record's per-request summary (the most deviant first).
RECORD_REQUESTS = 5


def ragged_reuse(cells_per_call: int) -> int:
    """Calls served by one drawn call (see :data:`RAGGED_REUSE_CELLS`)."""
    return int(max(1, min(MAX_REUSE, cells_per_call // RAGGED_REUSE_CELLS)))


def ragged_calls_budget(ctx) -> int:
    """The most calls a ragged scenario makes: the mode's calls, within the ragged share of its cells."""
    s, mode = ctx.scenario, ctx.mode
    share = RAGGED_CELL_SHARE if s.law_tests and len(s.random_requests) else LAWLESS_CELL_SHARE
    return int(max(1, min(mode.max_calls, mode.max_cells // (share * s.cells_per_call()))))


def ragged_calls_planned(ctx) -> int:
    """Calls of a ragged scenario's loop: enough samples for the mode's design TV in its best-fed law
    test (the tests given the stop see every random request with drafts on every call; the first-token
    test every random request on fresh draws only), within :func:`ragged_calls_budget`."""
    s, mode = ctx.scenario, ctx.mode
    cap = ragged_calls_budget(ctx)
    randoms = len(s.random_requests)
    if not randoms or not s.law_tests:
        return max(1, min(cap, mode.max_calls // GREEDY_CALL_SHARE))
    with_drafts = sum(1 for i in s.random_requests if s.requests[i].num_draft_tokens)
    per_call = max(with_drafts, randoms / ragged_reuse(s.cells_per_call()))
    n_target = min(planned_samples(mode.design_tv, mode.pit_bins, ctx.ledger.per_check / 2), mode.max_samples)
    return max(1, min(cap, int(np.ceil(PLANNING_MARGIN * n_target / per_call))))


@dataclass
class RaggedStep:
    """One ragged call's outputs: its block (:class:`~specdec_check.checker.ragged.block.RaggedBlock`),
    the host output [B, max(n) + 1], its per-request parse, and whether the block was fresh."""

    block: object
    out: np.ndarray
    parsed: ParsedStep
    fresh: bool


class RequestPitTally(PitTally):
    """A :class:`~specdec_check.checker.core.tally.PitTally` that also counts each request's PIT bins."""

    def __init__(self, scenario, check, *, bins, alpha, num_requests, describe):
        super().__init__(scenario.name, check, bins=bins, alpha=alpha)
        self.per_request = np.zeros((num_requests, bins), dtype=np.int64)
        self.describe = describe

    def add_requests(self, u, requests, *, categories=None, expected=None):
        if u.shape[0] == 0:
            return
        self.add_uniforms(u, categories=categories, expected=expected)
        cells = requests * self.bins + np.minimum((u * self.bins).astype(np.int64), self.bins - 1)
        self.per_request += np.bincount(cells, minlength=self.per_request.size).reshape(self.per_request.shape)

    def request_summary(self) -> list:
        """Per request with samples: its count and a descriptive chi-square p-value of its PIT bins
        against uniform (most deviant first)."""
        from scipy.stats import chisquare  # scipy.stats costs 1 s to import: only where a report lists requests

        rows = []
        for i in np.flatnonzero(self.per_request.sum(axis=1)):
            counts = self.per_request[i]
            pvalue = float(chisquare(counts).pvalue) if counts.sum() > 1 else 1.0
            rows.append({"request": int(i), "description": self.describe(i), "n": int(counts.sum()), "pvalue": pvalue})
        return sorted(rows, key=lambda r: r["pvalue"])

    def record(self, *, extra_details=None):
        details = dict(extra_details or {})
        details["requests"] = self.request_summary()[:RECORD_REQUESTS]
        return super().record(extra_details=details)


class RequestCounts:
    """Per request: first drafts accepted against their acceptance probabilities (the efficiency
    test's trials), and accepted drafts against their exact expectation."""

    def __init__(self, num_requests: int):
        self.first_accepted = np.zeros(num_requests)
        self.first_expected = np.zeros(num_requests)
        self.first_variance = np.zeros(num_requests)
        self.accepted = np.zeros(num_requests)
        self.accepted_expected = np.zeros(num_requests)
        self.steps = np.zeros(num_requests, dtype=np.int64)

    def add(self, group, parsed_group):
        req, block = group.requests, group.block
        self.steps[req] += 1
        self.accepted[req] += parsed_group.accepted
        self.accepted_expected[req] += block.count_law @ np.arange(group.n + 1)
        if group.n:
            a = block.accept_first
            self.first_accepted[req] += parsed_group.accepted > 0
            self.first_expected[req] += a
            self.first_variance[req] += a * (1 - a)

    def most_deviant(self) -> dict | None:
        """The request whose first-draft acceptances deviate most from their expectation (z-score)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (self.first_accepted - self.first_expected) / np.sqrt(self.first_variance)
        z = np.where(self.first_variance > 0, z, 0.0)
        if not np.any(z):
            return None
        i = int(np.argmax(np.abs(z)))
        return {"request": i, "z": float(z[i]), "first_accepted": float(self.first_accepted[i]),
                "first_expected": float(self.first_expected[i]),
                "accepted_per_step": float(self.accepted[i] / max(self.steps[i], 1)),
                "expected_per_step": float(self.accepted_expected[i] / max(self.steps[i], 1))}


class RaggedCounts(StepCounts):
    """The chain's step counts over every random request of a scenario, and the same per request."""

    def __init__(self, num_requests: int):
        super().__init__()
        self.requests = RequestCounts(num_requests)


class RaggedLaws(Check):
    """The chain law tests on every random request (see the module docstring), events of probability
    zero on every call, and the counts behind the efficiency test and the summary."""

    power = ("each PIT test pools every random request's samples, sized by samples_for(design TV, pit bins, alpha "
             "share) within the mode's calls and a tenth of its cells; its record names the most deviant requests")

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        if not len(scenario.random_requests) or not scenario.law_tests:
            return []
        tests = [PlannedTest("first_token", "first_token")] if "first_token" in selection else []
        if scenario.gamma:
            tests += [PlannedTest(name, name) for name in ("stop_conditional", "accepted_count") if name in selection]
            if "step_law" in selection and scenario.vocab_size <= PATH_LAW_MAX_VOCAB:
                tests.append(PlannedTest("step_law", "step_law"))
        return tests

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.requests = counts.requests
        self.tallies = {}
        self.pit_rng = None
        self.random_samples = 0

    def start(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        for name in _PIT_TESTS:
            if name in ctx.planned:
                self.tallies[name] = RequestPitTally(s, name, bins=ctx.mode.pit_bins, alpha=ctx.spend(name),
                                                     num_requests=s.num_requests, describe=s.describe_request)
        self.pit_rng = np.random.default_rng(ctx.rng.integers(2**63))

    @property
    def rejected_early(self) -> bool:
        return any(t.rejected_early for t in self.tallies.values())

    def _impossible(self, group, parsed, out_group, outcome) -> bool:
        """Events of probability zero in one group; False after a finding naming the request."""
        ctx, s, vb = self.ctx, self.ctx.scenario, group.block
        draw = vb.draw
        if (parsed.final < 0).any():
            dropped = dropped_final(parsed, draw.draft_token_ids, out_group)
            if dropped is not None:
                request = int(group.requests[dropped[1]["row"]])
                ctx.recorder.failure("impossible", f"{s.describe_request(request)}: {dropped[0]}",
                                     {**dropped[1], "request": request}, stop=True)
                return False
            self.counts.bonus_missing += int((parsed.final < 0).sum())
        if not ctx.selected("impossible"):
            return True
        events = impossible_events(parsed, draw.draft_token_ids, draw.draft_probs, draw.target_probs,
                                   tolerance=ctx.backend.tolerance,
                                   gathered=(vb.target_at, vb.draft_at, outcome.target, outcome.draft))
        for message, evidence in events:
            request = int(group.requests[evidence["row"]])
            message = re.sub(r"^\d+ row\(s\) ", "", re.sub(r"; first: row \d+$", "", message))
            values = "".join(f", {name} = {evidence[key]:.4g}" for key, name in (("target_prob", "p(token)"),
                                                                                 ("draft_prob", "q(token)"))
                             if key in evidence)
            ctx.recorder.failure("impossible", f"{s.describe_request(request)}: {message} (processed target law at "
                                 f"row {evidence['position']} of the request, token {evidence['token']}{values})",
                                 {**evidence, "request": request, "tolerance": ctx.backend.tolerance,
                                  "requests": [int(group.requests[r]) for r in evidence["rows"]]})
        if events:
            ctx.recorder.stop()
            return False
        return True

    def absorb(self, step: RaggedStep) -> bool:
        ctx, counts, tallies = self.ctx, self.counts, self.tallies
        uniforms = self.pit_rng.random
        for group in step.block.groups:
            req, vb, n = group.requests, group.block, group.n
            parsed = ParsedStep(step.parsed.accepted[req], step.parsed.final[req], step.parsed.emitted[req])
            out_group = step.out[req, : n + 1]
            outcome = vb.outcome(parsed.accepted, parsed.final)
            if not self._impossible(group, parsed, out_group, outcome):
                return False
            try:
                if "first_token" in tallies and step.fresh:
                    first = out_group[:, 0]
                    tallies["first_token"].add_requests(vb.pit_first(first, uniforms(first.shape[0])), req,
                                                        categories=first, expected=vb.first_expected)
                has = np.flatnonzero(parsed.final >= 0)
                if "stop_conditional" in tallies and n:
                    final = parsed.final[has]
                    tallies["stop_conditional"].add_requests(vb.pit_final(outcome, has, uniforms(final.shape[0])),
                                                             req[has], categories=final, expected=vb.final_expected)
                if "accepted_count" in tallies and n:
                    tallies["accepted_count"].add_requests(vb.pit_count(outcome, uniforms(req.shape[0])), req)
                if "step_law" in tallies and n and has.size == req.size:
                    tallies["step_law"].add_requests(vb.pit_step(outcome, uniforms(req.shape[0])), req)
            except ValueError as exc:  # a sample on an outcome of probability zero
                found = re.search(r"sample (\d+)", str(exc))
                request = int(req[int(found.group(1))]) if found else int(req[0])
                ctx.recorder.failure("impossible", f"{ctx.scenario.describe_request(request)}: an output has probability "
                                     f"zero under its exact law: {exc}",
                                     {"request": request, "output": step.out[request].tolist()}, stop=True)
                return False
            counts.add(Step(vb, out_group, parsed, outcome, host=True, fresh=step.fresh))
            self.requests.add(group, parsed)
            self.random_samples += req.size
        return True

    def finish(self) -> None:
        ctx = self.ctx
        if self.counts.bonus_missing and "step_law" in self.tallies:
            del self.tallies["step_law"]
            ctx.recorder.skipped("step_law", "the verifier omits the bonus token, so (k, y) is undefined for k = gamma")
        ctx.recorder.records += [t.record() for t in self.tallies.values()]
