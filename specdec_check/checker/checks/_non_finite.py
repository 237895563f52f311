"""The non-finite input probe: what a verifier does with a row of NaN probabilities."""

from __future__ import annotations

import numpy as np

from .._report import TestRecord
from ._base import Check

__all__ = ["NonFiniteProbe", "PROBE_ROWS"]

#: Rows of the probe's call: a full-sized call, so a verifier that checks only some rows is seen.
PROBE_ROWS = 4096


class NonFiniteProbe(Check):
    """Row 0 gets an all-NaN first target row (always read): the verifier should raise or return -1s.

    A verifier may raise, or mark the row invalid with -1 everywhere (the sync-free choice on a
    device). Emitting a token from a NaN law is a robustness problem, not a loss of exactness on
    valid inputs: a warning, or a failure with ``strict=True``.
    """

    power = "one call; exact (no alpha spent)"

    def __init__(self, run, caller, counts):
        self.run, self.caller = run, caller

    def start(self) -> None:
        run = self.run
        if not run.selected("non_finite"):
            return
        draw = self.caller.draw(rows=PROBE_ROWS)
        target = draw.target_probs.copy()
        target[0, 0, :] = np.nan
        bad = type(draw)(draw.draft_token_ids, draw.draft_probs, target, draw.pool_index)
        out = self.caller.call_raw(bad, run.next_seed())
        name = run.scenario.name
        if isinstance(out, Exception):  # raising on NaN input is the right answer
            run.record(TestRecord(name, "non_finite", "non-finite input probe", True, 0.0, 1,
                                  details={"behaviour": f"raised {type(out).__name__}"}))
            return
        row = np.asarray(out)[0] if np.ndim(out) == 2 else None
        passed = row is not None and bool((row == -1).all())
        run.record(TestRecord(name, "non_finite", "non-finite input probe", passed, 0.0, 1,
                              details={"behaviour": "returned -1 for the row" if passed else "emitted tokens"}))
        if not passed:
            run.warn("non_finite", "a row whose first target row is all NaN was silently turned into tokens "
                     f"{None if row is None else row.tolist()}; raise an error or return -1 for such a row",
                     {"row": 0, "output": None if row is None else row.tolist()})
