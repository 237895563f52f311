"""The output contract of a ragged verifier, per request.

The output is int [B, max(num_draft_tokens) + 1], -1 padded. Request ``i`` (``n_i`` drafts) uses
at most ``n_i + 1`` columns: its accepted drafts, then one recovered or bonus token, then -1;
every column past ``n_i`` is -1. Violations name the request (its index and parameters).
"""

from __future__ import annotations

import numpy as np

from ..chain.contract import ParsedStep, parse_step

__all__ = ["NOT_A_DRAFT", "check_ragged_output", "padded_drafts"]

#: Fill of the per-request draft matrix past a request's drafts: no output token or padding equals it,
#: so parsing stops at ``n_i`` (the bonus position) for every request.
NOT_A_DRAFT = -2


def padded_drafts(draft_token_ids, layout) -> np.ndarray:
    """Drafts per request, int64 [B, max(n)], :data:`NOT_A_DRAFT` past each request's own drafts."""
    return layout.padded(np.asarray(draft_token_ids, dtype=np.int64), NOT_A_DRAFT)


def check_ragged_output(out, draft_token_ids, layout, vocab_size: int, describe=lambda i: f"request {i}"):
    """``(violation, step)``: the first contract violation (``None`` or ``(message, evidence)``) and,
    when there is none, the outputs decoded per request (:class:`~specdec_check.checker.chain.contract.ParsedStep`:
    accepted drafts ``k_i``, final token or -1, tokens emitted). ``describe(i)`` names request ``i``."""
    batch, width = layout.batch, layout.width
    if not isinstance(out, np.ndarray):
        return (f"the verifier returned {type(out).__name__}, not an array", {}), None
    if out.shape != (batch, width):
        return (f"output shape {out.shape} != [B, max(num_draft_tokens) + 1] = {(batch, width)} for num_draft_tokens "
                f"{layout.num_draft_tokens.tolist()}", {"shape": list(out.shape)}), None
    if not np.issubdtype(out.dtype, np.integer):
        return (f"output dtype {out.dtype} is not an integer type", {"dtype": str(out.dtype)}), None
    out = out.astype(np.int64, copy=False)
    drafts = padded_drafts(draft_token_ids, layout)

    def bad(i, message, **extra):
        i = int(i)
        evidence = {"request": i, "num_draft_tokens": int(layout.num_draft_tokens[i]), "output": out[i].tolist(),
                    "drafts": drafts[i][drafts[i] != NOT_A_DRAFT].tolist(), **extra}
        return (f"{describe(i)}: {message} (drafts {evidence['drafts']}, output {evidence['output']})", evidence), None

    if out.size and (int(out.min()) < -1 or int(out.max()) >= vocab_size):
        i, j = (int(v) for v in np.argwhere((out < -1) | (out >= vocab_size))[0])
        return bad(i, f"token id {int(out[i, j])} at position {j} is outside [0, {vocab_size}) and not -1 padding",
                   position=j)
    beyond = (np.arange(width)[None, :] > layout.num_draft_tokens[:, None]) & (out != -1)
    if beyond.any():
        i, j = (int(v) for v in np.argwhere(beyond)[0])
        return bad(i, f"position {j} holds {int(out[i, j])}, but a request with {int(layout.num_draft_tokens[i])} "
                   f"draft(s) emits at most {int(layout.num_draft_tokens[i]) + 1} token(s): every later position must "
                   "be -1 (the row of another request, or an off-by-one in the ragged offsets?)", position=j)
    real = out >= 0
    if width > 1 and (real[:, 1:] > real[:, :-1]).any():
        i = int(np.flatnonzero((real[:, 1:] > real[:, :-1]).any(axis=1))[0])
        return bad(i, "a token follows -1 padding")
    if not real[:, 0].all():
        return bad(int(np.flatnonzero(~real[:, 0])[0]), "no token at all (every request emits at least one)")
    step = parse_step(out, drafts)
    over = np.flatnonzero(real.sum(axis=1) > step.accepted + 1)
    if over.size:
        return bad(over[0], "tokens after the first token that differs from its drafts")
    return None, ParsedStep(step.accepted, step.final, step.emitted)
