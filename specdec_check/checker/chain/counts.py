"""One call's outputs located in its block's laws, the events of probability zero under the standard rule
(checked on every call, no alpha spent), and the token counts every chain verifier run keeps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends.xp import to_numpy
from .contract import STANDARD_ONLY_EVENTS, any_impossible, check_output, dropped_final, impossible_events

__all__ = ["Step", "StepCounts", "locate", "structural"]


@dataclass
class Step:
    """One call's outputs where the checks read them.

    ``block`` is the call's :class:`~specdec_check.checker.chain.block.VerifierBlock` (its device copy
    when ``host`` is False), ``out`` the output, ``parsed`` its :class:`ParsedStep`, ``outcome``
    the :class:`StepOutcome` located in the block's laws; ``fresh`` is True for the first call
    on a block of inputs (only those feed the laws that hold over fresh drafts).
    """

    block: object
    out: object
    parsed: object
    outcome: object
    host: bool
    fresh: bool


#: The first-draft acceptance probabilities kept one per trial, at most this many (8 MB): past it, those of the
#: finished groups are kept once per distinct value with their multiplicities (the efficiency test's Poisson-binomial
#: law takes repeats). A run's trials grow with its samples (45 million at ``--tv 1e-3``), while a scenario's
#: distinct probabilities are set by its laws; kept one per trial, as views of each block's whole acceptance table,
#: they held 1.9 GB after three scenarios at ``--tv 1e-3``, and a sharded run's driver 5.2 GB. Quick and default
#: runs stay below the bound, so their numbers are those of the plain sum. (The merged group is not counted against
#: the bound: it holds a scenario's distinct probabilities, a few thousand in the built-in batteries.)
COMPRESS_VALUES = 1 << 20


class StepCounts:
    """Accepted and emitted tokens of every located call, against the exact expectations.

    ``first_accept_groups`` lists ``[acceptance probabilities of the first drafts, calls that saw each]``: per
    block of inputs its drafts' probabilities (a copy) and the calls on the block (an int); past
    :data:`COMPRESS_VALUES` kept values, the finished groups merged into one of distinct probabilities and their
    trial counts (an int array). ``bonus_missing`` counts fully accepted rows that emitted no bonus token.
    """

    def __init__(self):
        self.accepted_total = 0.0
        self.accepted_expected = 0.0  # the standard rule's exact expectation on the same rows
        self.optimal_expected = 0.0  # block verification's (the optimum among valid verifiers, Sun et al. 2025)
        self.emitted_total = 0
        self.first_accepted = 0
        self.first_accept_groups = []
        self._group_source = None  # the block acceptances the last group copied (calls on it join that group)
        self._loose = 0  # values kept one per trial (the groups not merged yet)
        self.bonus_missing = 0
        # Fresh rows' excess over the optimum, D = accepted - block verification's expectation on
        # the row's drafts: n, sum D, sum D^2 (the optimum test's sufficient statistics).
        self.excess_rows = 0
        self.excess_sum = 0.0
        self.excess_square = 0.0

    def add_tokens(self, block, parsed) -> None:
        """A call's accepted and emitted tokens, and the block's expected acceptances."""
        self.accepted_total += float(parsed.accepted.sum())
        self.accepted_expected += block.expected_accepted
        self.optimal_expected += block.optimal_accepted
        self.emitted_total += int(parsed.emitted.sum())

    def add(self, step: Step) -> None:
        """:meth:`add_tokens`, and the first-position acceptances (the efficiency test's trials)."""
        block, parsed = step.block, step.parsed
        self.add_tokens(block, parsed)
        if block.gamma and step.fresh:
            host = block if step.host else block.host
            excess = to_numpy(parsed.accepted).astype(np.float64) - host.optimal_accepted_rows
            self.excess_rows += excess.size
            self.excess_sum += float(excess.sum())
            self.excess_square += float(excess @ excess)
        if block.gamma:
            self.first_accepted += int((parsed.accepted > 0).sum())
            if not self.first_accept_groups or self._group_source is not block.accept_first:
                # a copy of the first column: a view would keep the block's whole acceptance table alive
                self.first_accept_groups.append([np.array(block.accept_first, dtype=np.float64), 0])
                self._group_source = block.accept_first
                self._loose += int(block.accept_first.size)
                if self._loose > COMPRESS_VALUES:
                    self._compress(keep_last=True)
            self.first_accept_groups[-1][1] += 1

    def _compress(self, *, keep_last: bool) -> None:
        """Merge the groups (all but the last, still counting, when ``keep_last``) into one group of distinct
        probabilities and their trial counts."""
        groups = self.first_accept_groups[:-1] if keep_last else self.first_accept_groups
        if len(groups) < 2:
            return
        values = np.concatenate([g[0] for g in groups])
        repeats = np.concatenate([np.broadcast_to(np.asarray(g[1], dtype=np.int64), g[0].shape) for g in groups])
        unique, inverse = np.unique(values, return_inverse=True)
        counts = np.zeros(unique.size, dtype=np.int64)
        np.add.at(counts, inverse.reshape(-1), repeats)
        self.first_accept_groups = [[unique, counts]] + (self.first_accept_groups[-1:] if keep_last else [])
        self._loose = int(self.first_accept_groups[-1][0].size) if keep_last else 0

    def merge(self, later: "StepCounts") -> "StepCounts":
        """Add ``later``'s counts (the calls of a later shard of the scenario): every field is a sum or a list
        of groups, so the merged counts are those of one run over both shards' calls; returns self."""
        for name in ("accepted_total", "accepted_expected", "optimal_expected", "emitted_total", "first_accepted",
                     "bonus_missing", "excess_rows", "excess_sum", "excess_square"):
            setattr(self, name, getattr(self, name) + getattr(later, name))
        self.first_accept_groups += later.first_accept_groups
        self._group_source = None  # a later call starts a group of its own
        self._loose += later._loose
        if self._loose > COMPRESS_VALUES:
            self._compress(keep_last=False)
        return self

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_group_source"] = None  # a shard's counts travel without the last block's acceptances
        return state

    def first_accept_probs(self):
        """``(probs, repeats)``: acceptance probabilities of every first draft tested, and how many
        calls saw each (a block of inputs serves several calls)."""
        if not self.first_accept_groups:
            return np.zeros(0), np.zeros(0)
        probs, repeats = [], []
        for values, calls in self.first_accept_groups:
            if np.ndim(calls) == 0:  # a block's drafts, seen by ``calls`` calls
                probs.append(values)
                repeats.append(np.full(values.size, calls, dtype=np.int64))
                continue
            # merged groups: each probability in the part of every bit of its trial count (repeats 2^k), so the
            # Poisson-binomial law sees at most ~30 distinct repeats (one per count, it convolved thousands of
            # groups: 36 s instead of 0.6 s for 100,000 values with log-normal counts)
            for bit in range(int(calls.max()).bit_length()):
                part = ((calls >> bit) & 1).astype(bool)
                if part.any():
                    probs.append(values[part])
                    repeats.append(np.full(int(part.sum()), 1 << bit, dtype=np.int64))
        return np.concatenate(probs), np.concatenate(repeats)


def locate(ctx, caller, counts: StepCounts, block, out, parsed, *, fresh: bool) -> Step | None:
    """Locate a call's outputs in ``block``'s laws and check them for events of probability zero.

    Outputs a device backend left on its device are located there (:meth:`VerifierCaller.device_block`):
    the laws go to the device once per block and only counts come back. A flagged event of
    probability zero brings the output to the host, whose path names the rows. None after a
    finding that stops the scenario.
    """
    backend = ctx.backend
    if not isinstance(out, np.ndarray):
        device = caller.device_block(block)
        outcome = device.outcome(parsed.accepted, parsed.final)
        tolerance = backend.tolerance if ctx.selected("impossible") else float("inf")
        if any_impossible(parsed, outcome, device, tolerance=tolerance):
            out = backend.to_host(out)
            parsed = check_output(out, block.draw.draft_token_ids, ctx.scenario.vocab_size)[1]
            return locate(ctx, caller, counts, block, out, parsed, fresh=fresh)
        counts.bonus_missing += int((parsed.final < 0).sum())
        return Step(device, out, parsed, outcome, host=False, fresh=fresh)
    outcome = block.outcome(parsed.accepted, parsed.final)
    if not structural(ctx, counts, block, out, parsed, outcome):
        return None
    return Step(block, out, parsed, outcome, host=True, fresh=fresh)


def structural(ctx, counts, block, out, parsed, outcome, *, tolerance=None) -> bool:
    """Check one call for events of probability zero; False after a finding that stops the scenario.

    A row that stops before its last draft without a final token is a failure (the recovered token
    equals the rejected draft, impossible, or was dropped, lossy); a fully accepted row without a
    bonus token is counted in ``counts.bonus_missing`` (lossless, inefficient). With the
    ``impossible`` check selected, every event of :func:`~specdec_check.checker.chain.contract.impossible_events`
    is a failure. ``tolerance`` overrides the backend's (the screen's rows are exact in every dtype).
    Under ``rule="any"`` only what every lossless rule rules out fails; the rest is information.
    """
    draw = block.draw
    tolerance = ctx.backend.tolerance if tolerance is None else tolerance
    events = []
    no_final = parsed.final < 0
    if no_final.any():
        dropped = dropped_final(parsed, draw.draft_token_ids, out)
        if dropped is not None:
            events.append(dropped)
        else:
            counts.bonus_missing += int(no_final.sum())
    if ctx.selected("impossible"):
        for message, evidence in impossible_events(parsed, draw.draft_token_ids, draw.draft_probs, draw.target_probs,
                                                   tolerance=tolerance, gathered=(block.target_at, block.draft_at,
                                                                                  outcome.target, outcome.draft)):
            evidence["tolerance"] = tolerance
            events.append((message, evidence))
    recorder = ctx.recorder
    if ctx.options.rule == "any":
        for message, evidence in events:  # once per scenario and kind of event
            if evidence["event"] in STANDARD_ONLY_EVENTS and not recorder.has("nonstandard", event=evidence["event"]):
                recorder.information("impossible", f"not the standard rule (information under rule='any'): {message}",
                                     evidence)
        events = [(m, e) for m, e in events if e["event"] not in STANDARD_ONLY_EVENTS]
    for message, evidence in events:
        recorder.failure("impossible", message, evidence)
    if events:
        recorder.stop()
        return False
    return True
