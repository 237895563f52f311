"""Events of probability zero under the standard rule, checked on every call (no alpha spent)."""

from __future__ import annotations

from .._contract import dropped_final, impossible_events

__all__ = ["structural"]


def structural(run, counts, block, out, parsed, outcome, *, tolerance=None) -> bool:
    """Check one call for events of probability zero; False after a finding that stops the scenario.

    A row that stops before its last draft without a final token is a failure (the recovered token
    equals the rejected draft, impossible, or was dropped, lossy); a fully accepted row without a
    bonus token is counted in ``counts.bonus_missing`` (lossless, inefficient). With the
    ``impossible`` check selected, every event of :func:`~specdec_check.checker._contract.impossible_events`
    is a failure. ``tolerance`` overrides the backend's (the screen's rows are exact in every dtype).
    """
    draw = block.draw
    tolerance = run.backend.tolerance if tolerance is None else tolerance
    no_final = parsed.final < 0
    if no_final.any():
        dropped = dropped_final(parsed, draw.draft_token_ids, out)
        if dropped is not None:
            run.fail("impossible", *dropped)
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
