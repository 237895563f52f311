"""A ragged call's exact laws: greedy requests' one output, random requests' chain laws.

A greedy request has one possible output (:func:`specdec_check.exact.greedy_outputs`). A random
request with ``n`` drafts is, given its processed target rows ``p`` and its draft rows ``q``
(one-hot where the drafter is), exactly one row of a chain verifier with ``gamma = n``
(Leviathan et al. 2023, Algorithm 1): so the random requests of a call are grouped by their
number of drafts, and each group is a :class:`~specdec_check.checker.chain.block.VerifierBlock`, whose
laws, randomized PITs and collision probabilities the chain checks already use.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..._ragged_layout import ragged_layout
from ...exact._sampling_params import greedy_outputs
from ...scenarios import VerifierDraw
from ..chain.block import VerifierBlock

__all__ = ["RaggedBlock", "RequestGroup", "duplicate_requests"]


class RequestGroup:
    """The random requests of a call with ``n`` drafts: their indices and their chain block."""

    def __init__(self, draw, n: int, requests: np.ndarray, *, conditional: bool):
        lay = draw.layout
        self.n, self.requests = n, requests
        rows = lay.row_start[requests][:, None] + np.arange(n + 1)
        flat = lay.draft_start[requests][:, None] + np.arange(n)
        vocab = draw.target_probs.shape[1]
        chain = VerifierDraw(draw.draft_token_ids[flat].reshape(requests.size, n),
                             draw.draft_law[flat].reshape(requests.size, n, vocab),
                             draw.target_probs[rows], requests)
        self.block = VerifierBlock(chain, conditional=conditional)


class RaggedBlock:
    """One drawn call and its exact laws, served to ``uses`` calls (fresh generators each time).

    ``greedy`` / ``random``: request indices; ``greedy_expected`` [G, width]: what greedy decoding
    emits for the greedy requests; ``groups``: a :class:`RequestGroup` per drafts count of the
    random requests (laws conditional on the drafted tokens, so a reused block stays exact).
    """

    def __init__(self, draw, *, conditional: bool = True):
        self.draw, self.uses = draw, 0
        lay = draw.layout
        greedy = draw.temperature == 0
        self.greedy, self.random = np.flatnonzero(greedy), np.flatnonzero(~greedy)
        self.greedy_expected = None
        if self.greedy.size:
            self.greedy_expected = greedy_outputs(draw.draft_token_ids, lay.num_draft_tokens,
                                                  draw.target_logits)[self.greedy]
        counts = lay.num_draft_tokens[self.random]
        self.groups = [RequestGroup(draw, int(n), self.random[counts == n], conditional=conditional)
                       for n in np.unique(counts)]

    @property
    def expected_accepted(self) -> float:
        return float(sum(g.block.expected_accepted for g in self.groups))


def duplicate_requests(draw, requests) -> "object":
    """A call holding each of ``requests`` twice, side by side (same logits, drafts and parameters):
    pairs whose outputs must be independent given the inputs."""
    lay = draw.layout
    requests = np.repeat(np.asarray(requests, dtype=np.int64), 2)
    n = lay.num_draft_tokens[requests]
    rows = np.concatenate([lay.row_start[r] + np.arange(lay.num_draft_tokens[r] + 1) for r in requests])
    flat = np.concatenate([lay.draft_start[r] + np.arange(lay.num_draft_tokens[r]) for r in requests]
                          + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
    return replace(
        draw, draft_token_ids=draw.draft_token_ids[flat], num_draft_tokens=n.copy(),
        draft_probs=None if draw.draft_probs is None else draw.draft_probs[flat], target_logits=draw.target_logits[rows],
        temperature=draw.temperature[requests], top_k=draw.top_k[requests], top_p=draw.top_p[requests],
        min_p=None if draw.min_p is None else draw.min_p[requests], target_probs=draw.target_probs[rows],
        draft_law=draw.draft_law[flat], layout=ragged_layout(n),
    )
