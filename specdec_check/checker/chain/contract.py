"""The one contract oracle for verifier outputs: parsing, the contract, and impossible events.

The checker and the installed pytest suite both judge outputs here, with the same rules and
the same per-dtype tolerance.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..backends.xp import arange_like, maximum

__all__ = ["STANDARD_ONLY_EVENTS", "ParsedStep", "any_impossible", "check_output", "dropped_final", "impossible_events",
           "parse_step"]

#: Events impossible under the standard rule (Leviathan et al. 2023, Algorithm 1) but not under every
#: lossless rule: block verification rejects drafts with p >= q and recovers from another residual.
#: The others (a token of target probability 0 emitted) are impossible under every lossless rule.
STANDARD_ONLY_EVENTS = ("rejected_certain_draft", "recovered_outside_residual", "dropped_final")


@dataclass(frozen=True)
class ParsedStep:
    """One call's outputs decoded against its drafts.

    ``accepted[b]`` is the number of leading outputs equal to the drafts (k), ``final[b]``
    the token after them (recovered or bonus) or -1 when the row stops without one, and
    ``emitted[b]`` the number of non-padding tokens.
    """

    accepted: np.ndarray
    final: np.ndarray
    emitted: np.ndarray


def check_output(out, draft_token_ids, vocab_size: int):
    """``(violation, step)``: the first contract violation (``None`` or ``(message, evidence)``) and,
    when there is none, the outputs decoded by :func:`parse_step`.

    Well-formed outputs (the common case) cost a few passes: the id range, the decoded step and
    one count of emitted tokens. Only a malformed output pays for :func:`_first_violation`,
    which names the rule broken and the first row that breaks it.
    """
    batch, gamma = draft_token_ids.shape
    if not isinstance(out, np.ndarray):
        return (f"the verifier returned {type(out).__name__}, not an array", {}), None
    if out.shape != (batch, gamma + 1):
        return (f"output shape {out.shape} != [B, gamma+1] = {(batch, gamma + 1)}", {"shape": list(out.shape)}), None
    kind = out.dtype.kind  # "i", "u" and "m" (timedelta64) are numpy's np.integer subtypes; bool is "b"
    if kind not in "ium":
        return (f"output dtype {out.dtype} is not an integer type", {"dtype": str(out.dtype)}), None
    if batch <= SMALL_CALL_ROWS and out.dtype == np.int64:
        step = _small_step(out, draft_token_ids, vocab_size)
        if step is not None:
            return None, step
        # malformed: the general path below names the first rule broken
    if kind == "u" and out.size and int(out.max()) >= vocab_size:
        row, col = (int(i) for i in np.argwhere(out >= vocab_size)[0])
        return (f"token id {int(out[row, col])} at row {row}, position {col} is outside [0, {vocab_size})",
                {"row": row, "position": col, "token": int(out[row, col])}), None
    if out.dtype != np.int64:
        out = out.astype(np.int64)
    if not out.size:
        return None, parse_step(out, draft_token_ids)
    if int(out.min()) < -1 or int(out.max()) >= vocab_size:
        return _first_violation(out, draft_token_ids, vocab_size), None
    step = parse_step(out, draft_token_ids)
    # Positions before a row's stop k are its drafts (real tokens) and position k is its final
    # token or -1, so every row emits at least k + [final >= 0] tokens, with equality exactly when
    # nothing follows the final token: equal totals mean equality in every row.
    if np.count_nonzero(out >= 0) != int(step.emitted.sum()) or bool((out[:, 0] < 0).any()):
        return _first_violation(out, draft_token_ids, vocab_size), None
    return None, step


#: Calls of at most this many rows are decoded row by row in Python: at one to eight rows the vectorised
#: checks' dozen numpy calls cost more (20 to 27 us a call against 7 to 19; most of the default battery's
#: 21,779 calls have 1 to 7 rows) than a loop over the rows' lists (issue 31); from 16 rows they cost less.
SMALL_CALL_ROWS = 8


def _small_step(out, draft_token_ids, vocab_size: int):
    """:func:`parse_step` of a well-formed int64 output of a few rows, or None when any rule of the contract is
    broken (ids in ``[0, V)`` or -1, at least one token, the drafts' prefix, then one final token or -1, then -1)."""
    accepted, final, emitted = [], [], []
    for row, drafts in zip(out.tolist(), draft_token_ids.tolist()):
        k = 0
        for token, draft in zip(row, drafts):
            if token != draft:
                break
            k += 1
        last = row[k]
        if not -1 <= last < vocab_size or (last < 0 and k == 0) or any(t != -1 for t in row[k + 1:]):
            return None
        if any(not 0 <= t < vocab_size for t in row[:k]):  # drafts outside [0, V): only a custom scenario
            return None
        accepted.append(k)
        final.append(last)
        emitted.append(k + (last >= 0))
    return ParsedStep(np.array(accepted, dtype=np.int64), np.array(final, dtype=np.int64),
                      np.array(emitted, dtype=np.int64))


def _first_violation(out, draft_token_ids, vocab_size: int):
    """``(message, evidence)`` for the first rule an int64 output breaks, in the order the
    contract states them: ids in ``[0, V)`` or -1, padding a suffix, at least one token, and
    nothing after the first token that differs from the drafts."""
    gamma = draft_token_ids.shape[1]
    if ((out + 1).view(np.uint64) > vocab_size).any():  # -1 -> 0, 0..V-1 -> 1..V, the rest above V
        row, col = (int(i) for i in np.argwhere((out < -1) | (out >= vocab_size))[0])
        return (f"token id {int(out[row, col])} at row {row}, position {col} is outside [0, {vocab_size}) and not -1 "
                "padding", {"row": row, "position": col, "token": int(out[row, col])})
    real = out >= 0
    if gamma and (real[:, 1:] > real[:, :-1]).any():  # padding must be a suffix
        row = int(np.flatnonzero((real[:, 1:] > real[:, :-1]).any(axis=1))[0])
        return (f"row {row} has a token after -1 padding: {out[row].tolist()}", {"row": row, "output": out[row].tolist()})
    if not real[:, 0].all():
        row = int(np.flatnonzero(~real[:, 0])[0])
        return (f"row {row} emitted no token at all: {out[row].tolist()}", {"row": row, "output": out[row].tolist()})
    step = parse_step(out, draft_token_ids)
    over = np.flatnonzero(real.sum(axis=1) > step.accepted + 1)
    if not over.size:  # only drafts outside [0, V) get here (the checker never draws them)
        row = int(np.flatnonzero(real.sum(axis=1) != step.emitted)[0])
        return (f"row {row} cannot be decoded against its drafts {draft_token_ids[row].tolist()} "
                f"(output {out[row].tolist()}): draft ids must lie in [0, {vocab_size})",
                {"row": row, "drafts": draft_token_ids[row].tolist(), "output": out[row].tolist()})
    row = int(over[0])
    return (f"row {row} emits tokens after the first token that differs from its drafts "
            f"(drafts {draft_token_ids[row].tolist()}, output {out[row].tolist()})",
            {"row": row, "drafts": draft_token_ids[row].tolist(), "output": out[row].tolist()})


def parse_step(out: np.ndarray, draft_token_ids: np.ndarray) -> ParsedStep:
    """Decode well-formed int64 outputs (see :func:`check_output`) into accepted count and final token.

    ``accepted`` counts the leading outputs equal to the drafts, one column at a time (numpy's
    reductions along a short row axis cost several times more); ``final`` is the output at that
    position, -1 when the row stops there without a token.
    """
    batch, gamma = draft_token_ids.shape
    accepted = np.zeros(batch, dtype=np.int64)
    if gamma:
        alive = out[:, 0] == draft_token_ids[:, 0]  # padding (-1) never equals a draft
        accepted += alive
        for j in range(1, gamma):
            alive &= out[:, j] == draft_token_ids[:, j]
            accepted += alive
    final = out.reshape(-1)[np.arange(0, batch * (gamma + 1), gamma + 1) + accepted].astype(np.int64, copy=False)
    return ParsedStep(accepted, final, accepted + (final >= 0))


def dropped_final(step: ParsedStep, draft_token_ids, out):
    """``(message, evidence)`` when a row stops before its last draft with no final token, else None.

    Every emitted token then equals a draft: either the recovered token equals the rejected draft
    (impossible: a draft is rejected only where q(x) > p(x), so the residual is zero there) or the
    recovered token was dropped (lossy). A fully accepted row without a bonus token is lossless
    (fewer tokens per step): an inefficiency, judged elsewhere.
    """
    gamma = draft_token_ids.shape[1]
    dropped = (step.final < 0) & (step.accepted < gamma)
    if not dropped.any():
        return None
    b = int(np.flatnonzero(dropped)[0])
    return ("a row stops before its last draft with every emitted token equal to a draft and no final token: either "
            "the recovered token equals the rejected draft (impossible: a draft is rejected only where q(x) > p(x), "
            "so the residual is zero there) or the recovered token was dropped (lossy)",
            {"event": "dropped_final", "row": b, "drafts": draft_token_ids[b].tolist(), "output": out[b].tolist()})


#: Absolute part of the impossible-event tolerance, as a fraction of the relative one: probabilities
#: below ``tol * 1e-3`` are at the dtype's underflow scale, where ``p`` and ``q`` compare arbitrarily.
ABSOLUTE_TOLERANCE_SCALE = 1e-3
#: Rows named in an impossible event's evidence (the first one is described; the count says the rest).
EVIDENCE_ROWS = 10


def _at_least(a, b, tol):
    """``a >= b`` up to a relative/absolute tolerance ``tol`` (exact when tol == 0); numpy or torch."""
    if not tol:
        return a >= b
    larger = maximum(abs(a), abs(b))
    return a >= b + tol * larger + tol * ABSOLUTE_TOLERANCE_SCALE


def any_impossible(step: ParsedStep, outcome, block, *, tolerance: float) -> bool:
    """Whether :func:`impossible_events` (or a dropped final token) would report anything.

    Masks only, with the same comparisons, on numpy arrays or on device tensors (one host
    synchronisation); the caller reruns the host path to name the rows when this is True.
    ``outcome`` is the call's :class:`~specdec_check.checker.chain.block.StepOutcome` in ``block``.
    """
    gamma = block.gamma
    has_final = step.final >= 0
    if gamma:
        rejected = (step.accepted < gamma) & has_final
        at = block.rows * gamma + step.accepted.clip(max=gamma - 1)
        p_x, q_x = block.target_at.reshape(-1)[at], block.draft_at.reshape(-1)[at]
        bad = (~has_final & (step.accepted < gamma)) | (rejected & _at_least(p_x, q_x, tolerance) & (p_x > 0))
        bad = bad | (rejected & _at_least(outcome.draft, outcome.target, tolerance))
        positions = arange_like(block.target_at, gamma)
        bad = bad | ((step.accepted[:, None] > positions) & (block.target_at <= 0)).any(1)
    else:
        bad = step.accepted < 0  # all False
    bad = bad | ((step.accepted == gamma) & has_final & (outcome.target <= 0))
    return bool(bad.any())


def impossible_events(step: ParsedStep, draft_token_ids, draft_probs, target_probs, *, tolerance: float,
                      gathered=None):
    """Return a list of ``(message, evidence)`` for events of probability zero under the exact rule.

    - a draft rejected although ``p(x) >= q(x)`` (its acceptance probability is 1);
    - a draft accepted although ``p(x) = 0``;
    - a recovered token where the residual ``max(0, p - q)`` is zero;
    - a bonus token of target probability zero.
    ``tolerance`` widens each comparison for low-precision backends. ``gathered``, when the
    caller has them, is ``(target_at, draft_at, final_target, final_draft)``: the probabilities of
    the drafted tokens [B, gamma] and of each row's final token at its stop position ``k``
    (``p_k(y)``, ``q_{min(k, gamma-1)}(y)``) [B].
    """
    batch, gamma = draft_token_ids.shape
    rows = np.arange(batch)
    events = []
    report = functools.partial(_impossible_event, events)
    y = np.maximum(step.final, 0)
    if gathered is None:
        stop = np.minimum(step.accepted, gamma)
        target_at = np.take_along_axis(target_probs[:, :gamma], draft_token_ids[..., None], axis=2)[..., 0]
        draft_at = np.take_along_axis(draft_probs, draft_token_ids[..., None], axis=2)[..., 0]
        final_target = target_probs[rows, stop, y]
        final_draft = draft_probs[rows, np.minimum(stop, gamma - 1), y] if gamma else np.zeros(batch)
    else:
        target_at, draft_at, final_target, final_draft = gathered
    if gamma:
        k = np.minimum(step.accepted, gamma - 1)
        rejected = (step.accepted < gamma) & (step.final >= 0)
        at = rows * gamma + k
        x = draft_token_ids.reshape(-1)[at]
        p_x = target_at.reshape(-1)[at]
        q_x = draft_at.reshape(-1)[at]
        report("rejected_certain_draft", rejected & _at_least(p_x, q_x, tolerance) & (p_x > 0),
               "{count} row(s) rejected a draft whose target probability is at least its draft probability "
               "(acceptance probability 1 under the standard rule); first: row {row}", k, x, target_prob=p_x,
               draft_prob=q_x)
        p_y, q_y = final_target, final_draft  # rows that rejected stop at k < gamma
        report("recovered_outside_residual", rejected & _at_least(q_y, p_y, tolerance),
               "{count} row(s) recovered a token where the residual max(0, p - q) is zero (impossible under the "
               "standard rule); first: row {row}",
               k, y, target_prob=p_y, draft_prob=q_y)
        zero_target = target_at <= 0
        if zero_target.any():  # rare: only drafts the target rules out can be accepted wrongly
            zero_accept = (step.accepted[:, None] > np.arange(gamma)) & zero_target
            hit = zero_accept.any(axis=1)
            pos = zero_accept.argmax(axis=1)
            report("accepted_impossible_draft", hit,
                   "{count} row(s) accepted a draft the target gives probability zero; first: row {row}",
                   pos, draft_token_ids[rows, pos], target_prob=target_at[rows, pos])
    bonus = (step.accepted == gamma) & (step.final >= 0)
    p_bonus = final_target  # rows that accepted every draft stop at gamma
    report("impossible_bonus", bonus & (p_bonus <= 0),
           "{count} row(s) emitted a bonus token the target gives probability zero; first: row {row}",
           np.full(batch, gamma), y, target_prob=p_bonus)
    return events


def _impossible_event(events, event, mask, message, position, token, **extra) -> None:
    """Append ``(message, evidence)`` for the rows of ``mask`` (the first one named) to ``events``."""
    if not mask.any():
        return
    idx = np.flatnonzero(mask)
    b = int(idx[0])
    evidence = {"event": event, "rows": idx[:EVIDENCE_ROWS].tolist(), "count": int(idx.size), "row": b,
                "position": int(position[b]), "token": int(token[b])}
    evidence.update({k: float(v[b]) for k, v in extra.items()})
    named = f" (token {int(token[b])} at position {int(position[b])}"
    named += "".join(f", {k.replace('_prob', '')} probability {float(v[b]):.4g}" for k, v in extra.items()) + ")"
    events.append((message.format(count=idx.size, row=b) + named, evidence))
