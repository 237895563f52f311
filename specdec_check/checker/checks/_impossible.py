"""Events of probability zero under the standard rule, checked on every call (no alpha spent)."""

from __future__ import annotations

import numpy as np

from .._contract import impossible_events

__all__ = ["structural"]


def structural(run, counts, block, out, parsed, outcome, *, tolerance=None) -> bool:
    """Check one call for events of probability zero; False after a finding that stops the scenario.

    A row that stops before its last draft without a final token is a failure (the recovered token
    equals the rejected draft, impossible, or was dropped, lossy); a fully accepted row without a
    bonus token is counted in ``counts.bonus_missing`` (lossless, inefficient). With the
    ``impossible`` check selected, every event of :func:`~specdec_check.checker._contract.impossible_events`
    is a failure. ``tolerance`` overrides the backend's (the screen's rows are exact in every dtype).
    """
    draw, gamma = block.draw, run.scenario.gamma
    tolerance = run.backend.tolerance if tolerance is None else tolerance
    no_final = parsed.final < 0
    if no_final.any():
        dropped = no_final & (parsed.accepted < gamma)
        if dropped.any():
            b = int(np.flatnonzero(dropped)[0])
            run.fail("impossible", "a row stops before its last draft with every emitted token equal to a draft "
                     "and no final token: either the recovered token equals the rejected draft (impossible: "
                     "a draft is rejected only where q(x) > p(x), so the residual is zero there) or the "
                     "recovered token was dropped (lossy)",
                     {"row": b, "drafts": draw.draft_token_ids[b].tolist(), "output": out[b].tolist()})
            run.stopped = True
            return False
        counts.bonus_missing += int(no_final.sum())
    if run.selected("impossible"):
        events = impossible_events(parsed, draw.draft_token_ids, draw.draft_probs, draw.target_probs,
                                   tolerance=tolerance, gathered=(block.target_at, block.draft_at,
                                                                  outcome.target, outcome.draft))
        for message, evidence in events:
            evidence["tolerance"] = tolerance
            run.fail("impossible", message, evidence)
        if events:
            run.stopped = True
            return False
    return True
