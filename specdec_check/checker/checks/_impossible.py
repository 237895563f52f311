"""Events of probability zero under the standard rule, checked on every call (no alpha spent)."""

from __future__ import annotations

from .._contract import STANDARD_ONLY_EVENTS, dropped_final, impossible_events

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
    events = []
    no_final = parsed.final < 0
    if no_final.any():
        dropped = dropped_final(parsed, draw.draft_token_ids, out)
        if dropped is not None:
            events.append(dropped)
        else:
            counts.bonus_missing += int(no_final.sum())
    if run.selected("impossible"):
        for message, evidence in impossible_events(parsed, draw.draft_token_ids, draw.draft_probs, draw.target_probs,
                                                   tolerance=tolerance, gathered=(block.target_at, block.draft_at,
                                                                                  outcome.target, outcome.draft)):
            evidence["tolerance"] = tolerance
            events.append((message, evidence))
    if run.options.rule == "any":  # only what every lossless rule rules out fails; the rest is information
        for message, evidence in events:
            if evidence["event"] in STANDARD_ONLY_EVENTS:
                _nonstandard(run, message, evidence)
        events = [(m, e) for m, e in events if e["event"] not in STANDARD_ONLY_EVENTS]
    for message, evidence in events:
        run.fail("impossible", message, evidence)
    if events:
        run.stopped = True
        return False
    return True


def _nonstandard(run, message, evidence) -> None:
    """Name, once per scenario and kind of event, where the verifier departs from the standard rule."""
    seen = {f.evidence.get("event") for f in run.findings if f.kind == "nonstandard"}
    if evidence["event"] not in seen:
        run.fail("impossible", f"not the standard rule (information under rule='any'): {message}", evidence,
                 kind="nonstandard")
