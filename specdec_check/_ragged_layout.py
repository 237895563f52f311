"""The ragged batch layout of the production calling convention (vLLM v1 ``RejectionSampler``).

A batch of ``B`` requests, request ``i`` with ``n_i = num_draft_tokens[i]`` drafts (0 allowed):

- ``draft_token_ids`` [T], ``T = sum(n_i)``: every request's drafts, concatenated in request order;
- ``draft_probs`` [T, V]: one row per draft, in the same order (or None for one-hot drafts);
- ``target_logits`` [T + B, V]: request ``i``'s ``n_i`` target rows then its bonus row, contiguous;
- the output [B, max(n_i) + 1], -1 padded: request ``i`` uses at most ``n_i + 1`` columns.

So draft ``j`` of request ``i`` is flat draft ``draft_start[i] + j`` and scores against target row
``row_start[i] + j = draft_start[i] + i + j``; the bonus row of request ``i`` is ``row_start[i] + n_i``.
numpy only; shared by the exact laws, the reference samplers, the scenarios and the checker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RaggedLayout", "ragged_layout"]


@dataclass(frozen=True)
class RaggedLayout:
    """Index arrays of one ragged batch (all int64).

    - ``num_draft_tokens`` [B]; ``draft_start`` [B]: exclusive cumulative sum (``cu_num_draft_tokens``
      shifted right); ``row_start`` [B]: ``draft_start + arange(B)``; ``bonus_row`` [B]: ``row_start + n``;
    - ``draft_request`` [T] / ``draft_position`` [T]: the request and position of each flat draft;
      ``draft_row`` [T]: the target row each draft is scored against (vLLM's ``target_logits_indices``);
    - ``row_request`` [T + B]: the request of each target row;
    - ``width``: ``max(n) + 1``, the output's columns.
    """

    num_draft_tokens: np.ndarray
    draft_start: np.ndarray
    row_start: np.ndarray
    bonus_row: np.ndarray
    draft_request: np.ndarray
    draft_position: np.ndarray
    draft_row: np.ndarray
    row_request: np.ndarray
    width: int

    @property
    def batch(self) -> int:
        return int(self.num_draft_tokens.shape[0])

    @property
    def num_drafts(self) -> int:
        return int(self.draft_request.shape[0])

    @property
    def num_rows(self) -> int:
        return self.num_drafts + self.batch

    def padded(self, flat: np.ndarray, fill) -> np.ndarray:
        """Per-draft values ``flat`` [T] laid out per request [B, width - 1], ``fill`` beyond ``n_i``."""
        out = np.full((self.batch, self.width - 1), fill, dtype=np.asarray(flat).dtype)
        out[self.draft_request, self.draft_position] = flat
        return out


def ragged_layout(num_draft_tokens) -> RaggedLayout:
    """The :class:`RaggedLayout` of drafts per request ``num_draft_tokens`` (ints >= 0), unvalidated beyond that."""
    n = np.asarray(num_draft_tokens, dtype=np.int64).reshape(-1)
    if n.size and int(n.min()) < 0:
        raise ValueError(f"num_draft_tokens must be >= 0 for every request; got {n.tolist()}.")
    batch = n.shape[0]
    draft_start = np.zeros(batch, dtype=np.int64)
    if batch > 1:
        np.cumsum(n[:-1], out=draft_start[1:])
    row_start = draft_start + np.arange(batch, dtype=np.int64)
    draft_request = np.repeat(np.arange(batch, dtype=np.int64), n)
    draft_position = np.arange(draft_request.shape[0], dtype=np.int64) - draft_start[draft_request]
    return RaggedLayout(
        num_draft_tokens=n, draft_start=draft_start, row_start=row_start, bonus_row=row_start + n,
        draft_request=draft_request, draft_position=draft_position,
        draft_row=row_start[draft_request] + draft_position,
        row_request=np.repeat(np.arange(batch, dtype=np.int64), n + 1),
        width=int(n.max()) + 1 if batch else 1,
    )
