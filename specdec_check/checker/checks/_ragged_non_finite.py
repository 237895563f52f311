"""The non-finite input probe of a ragged verifier: a NaN row of logits."""

from __future__ import annotations

import numpy as np

from .._report import TestRecord
from ._base import Check

__all__ = ["RaggedNonFiniteProbe"]


class RaggedNonFiniteProbe(Check):
    """The first target row of one request (a random one when there is one) is all NaN: the verifier
    should raise, or return -1 for that request. Emitting a token from a NaN row is a robustness
    problem, not a loss of exactness on valid inputs: a warning, or a failure with ``strict=True``
    (as the chain's probe). (-inf logits are legitimate: masked tokens.)"""

    power = "one call; exact (no alpha spent)"

    def __init__(self, run, caller, counts):
        self.run, self.caller = run, caller

    def start(self) -> None:
        run, s = self.run, self.run.scenario
        if not run.selected("non_finite"):
            return
        draw = self.caller.reused_draw()
        request = int((s.random_requests if len(s.random_requests) else s.greedy_requests)[0])
        logits = draw.target_logits.copy()
        logits[draw.layout.row_start[request]] = np.nan
        out = self.caller.call_raw(draw.with_logits(logits), run.next_seed())
        if isinstance(out, Exception):
            run.record(TestRecord(s.name, "non_finite", "non-finite input probe", True, 0.0, 1,
                                  details={"behaviour": f"raised {type(out).__name__}", "request": request}))
            return
        row = np.asarray(out)[request] if np.ndim(out) == 2 and np.shape(out)[0] > request else None
        passed = row is not None and bool((row == -1).all())
        run.record(TestRecord(s.name, "non_finite", "non-finite input probe", passed, 0.0, 1,
                              details={"behaviour": "returned -1 for the request" if passed else "emitted tokens",
                                       "request": request}))
        if not passed:
            run.warn("non_finite", f"{s.describe_request(request)}: its first target row of logits is all NaN, and "
                     f"the verifier silently emitted {None if row is None else row.tolist()}; raise an error or return "
                     "-1 for such a request", {"request": request, "output": None if row is None else row.tolist()})
