"""Greedy requests: exact, deterministic checks (no statistics, no alpha).

A greedy request (temperature 0) must emit what greedy decoding would: its drafts while each
equals the argmax of its target row, then the argmax at the first draft that differs (or the
bonus row's argmax when every draft matches). The drawn logits have a clear gap between the two
largest logits of every row, so any argmax convention agrees; every call's greedy requests are
compared with that one output, and a difference names the request, its drafts, the argmax of
its rows, and the expected and emitted tokens. Like any event of probability zero, a difference ends
the scenario after the call that showed it (every greedy request of that call is compared).
"""

from __future__ import annotations

import numpy as np

from ..checks.base import Check
from ..core.report import TestRecord

__all__ = ["GreedyExact"]


class GreedyExact(Check):
    """Every greedy request of every call against greedy decoding's output."""

    power = "exact: every greedy request of every call (no alpha spent)"

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.checked = 0
        self.mismatches = 0
        self.first = None
        self.by_request = {}

    def absorb(self, step) -> bool:
        block = step.block
        if not self.ctx.selected("greedy") or not block.greedy.size:
            return True
        emitted = step.out[block.greedy]
        expected = block.greedy_expected
        bad = (emitted != expected).any(axis=1)
        self.checked += int(block.greedy.size)
        if bad.any():
            self.mismatches += int(bad.sum())
            for i in block.greedy[bad]:
                self.by_request[int(i)] = self.by_request.get(int(i), 0) + 1
            if self.first is None:
                g = int(np.flatnonzero(bad)[0])
                self.first = self._evidence(block, int(block.greedy[g]), expected[g], emitted[g])
                self.first["rows_seen"] = int(self.ctx.samples)  # request outputs looked at, this call's included
            self.ctx.recorder.stop()
            return False
        return True

    @staticmethod
    def _evidence(block, request, expected, emitted) -> dict:
        draw = block.draw
        lay = draw.layout
        n = int(lay.num_draft_tokens[request])
        rows = lay.row_start[request] + np.arange(n + 1)
        drafts = draw.draft_token_ids[lay.draft_start[request]: lay.draft_start[request] + n]
        return {"request": request, "num_draft_tokens": n, "drafts": drafts.tolist(),
                "argmax_of_rows": draw.target_logits[rows].argmax(axis=1).tolist(),
                "expected": [int(t) for t in expected if t >= 0], "emitted": [int(t) for t in emitted if t >= 0],
                "expected_row": expected.tolist(), "emitted_row": emitted.tolist()}

    def finish(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        if not ctx.selected("greedy") or not len(s.greedy_requests):
            return
        passed = self.mismatches == 0
        ctx.recorder.record(TestRecord(s.name, "greedy", "exact (greedy decoding's output)", passed, 0.0, self.checked,
                              details={"mismatches": self.mismatches, "by_request": dict(sorted(self.by_request.items())),
                                       **({"first": self.first} if self.first else {})}))
        if not passed:
            e = self.first
            others = sorted(set(self.by_request) - {e["request"]})
            ctx.recorder.failure("greedy", f"{s.describe_request(e['request'])}: greedy decoding emits {e['expected']} but the "
                     f"verifier emitted {e['emitted']} (drafts {e['drafts']}, argmax of its target rows "
                     f"{e['argmax_of_rows']}); {self.mismatches} of the {self.checked} greedy requests checked differ"
                     + (f", also requests {others}" if others else ""),
                     {**e, "mismatches": self.mismatches, "checked": self.checked,
                      "by_request": dict(sorted(self.by_request.items()))})
