"""Strategies for the production calling convention: per-request sampling parameters and ragged batches.

:func:`sample_params` draws one request's (temperature, top-k, top-p[, min-p]); :func:`ragged_batches`
draws a whole ragged call: a vocabulary, requests with their drafts counts (0 allowed) and
parameters, one-hot or stochastic drafts (or ``draft_probs=None``), and a seed from which
:class:`~specdec_check.scenarios.RaggedScenario` draws the logits with clear boundary margins.
Everything shrinks towards a single greedy request with no drafts on a tiny vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from hypothesis import strategies as st

from specdec_check.exact import VLLM_V1_PROCESSING, SamplingProcessing
from specdec_check.scenarios import RaggedRequest, RaggedScenario
from specdec_check.scenarios._ragged import HEAD_TOKENS, MAX_TOP_P

__all__ = ["RaggedBatch", "SampleParams", "ragged_batches", "sample_params"]

#: Temperatures a random request draws from (the battery's range, 0.3 to 2).
TEMPERATURES = (0.3, 2.0)
#: Top-p values drawn when top-p is on: away from 1 (where the tail would hold the boundary).
TOP_P = (0.3, MAX_TOP_P)


@dataclass(frozen=True)
class SampleParams:
    """One request's sampling parameters: ``temperature`` 0 is greedy; ``top_k`` 0, ``top_p`` 1.0 and
    ``min_p`` 0 are off."""

    temperature: float
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@st.composite
def sample_params(draw, *, vocab_size: int = 64, greedy: bool | None = None, min_p: bool = False) -> SampleParams:
    """One request's :class:`SampleParams` for a vocabulary of ``vocab_size``.

    ``greedy``: None draws greedy or random requests, True only greedy, False only random.
    Top-k stays below ``min(vocab_size, 32)`` (the head of the checker's logits, where its boundary
    has a clear gap); top-p in [0.3, 0.95] when on; ``min_p`` draws min-p values too (for
    processings that apply it). Shrinks towards greedy, then towards every filter off.
    """
    is_greedy = draw(st.booleans().map(lambda b: not b)) if greedy is None else bool(greedy)
    if is_greedy:
        return SampleParams(0.0)
    head = min(vocab_size, HEAD_TOKENS)
    temperature = draw(st.one_of(st.just(1.0), st.floats(*TEMPERATURES)))
    top_k = draw(st.one_of(st.just(0), st.integers(1, head - 1))) if head > 1 else 0
    top_p = draw(st.one_of(st.just(1.0), st.floats(*TOP_P)))
    value = draw(st.one_of(st.just(0.0), st.floats(0.01, 0.3))) if min_p else 0.0
    return SampleParams(round(temperature, 3), top_k, round(top_p, 3), round(value, 3))


@dataclass(frozen=True, eq=False)
class RaggedBatch:
    """One ragged call: its scenario (vocabulary, requests, drafts given or not) and the seed of its draw.

    ``draw`` is the drawn call (:class:`~specdec_check.scenarios.RaggedDraw`: logits, drafts,
    parameters and their exact laws); ``kwargs()`` the verifier's keyword arguments (numpy, minus
    ``generator``).
    """

    scenario: RaggedScenario
    seed: int

    @cached_property
    def draw(self):
        return self.scenario.draw(np.random.default_rng(self.seed))

    def kwargs(self) -> dict:
        d = self.draw
        out = {"draft_token_ids": d.draft_token_ids, "num_draft_tokens": d.num_draft_tokens,
               "draft_probs": d.draft_probs, "target_logits": d.target_logits, "temperature": d.temperature,
               "top_k": d.top_k, "top_p": d.top_p}
        if d.min_p is not None:
            out["min_p"] = d.min_p
        return out

    def __repr__(self) -> str:
        s = self.scenario
        return (f"RaggedBatch(vocab_size={s.vocab_size}, draft_probs_given={s.draft_probs_given}, seed={self.seed}, "
                f"requests={list(s.requests)!r})")

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis / IPython pretty-printing
        printer.text(repr(self))


@st.composite
def ragged_batches(draw, *, min_requests: int = 1, max_requests: int = 6, max_draft_tokens: int = 4,
                   vocab_sizes=None, draft_probs: bool | None = None, greedy: bool | None = None,
                   processing: SamplingProcessing = VLLM_V1_PROCESSING) -> RaggedBatch:
    """A :class:`RaggedBatch`: ``min_requests`` to ``max_requests`` requests, each with 0 to
    ``max_draft_tokens`` drafts and :func:`sample_params`, on a vocabulary from ``vocab_sizes``
    (default 2 to 1000); ``draft_probs`` None draws both conventions, True always hands draft rows
    (one-hot or stochastic per request), False hands ``draft_probs=None`` (one-hot drafts);
    ``greedy`` as in :func:`sample_params`.
    """
    if not 1 <= min_requests <= max_requests:
        raise ValueError(f"need 1 <= min_requests <= max_requests; got {min_requests}, {max_requests}.")
    if max_draft_tokens < 0:
        raise ValueError(f"max_draft_tokens must be >= 0; got {max_draft_tokens}.")
    vocab = draw(vocab_sizes if vocab_sizes is not None else st.sampled_from((2, 3, 7, 64, 1000)))
    given = draw(st.booleans().map(lambda b: not b)) if draft_probs is None else bool(draft_probs)
    count = draw(st.integers(min_requests, max_requests))
    requests = []
    for _ in range(count):
        n = draw(st.integers(0, max_draft_tokens))
        params = draw(sample_params(vocab_size=vocab, greedy=greedy, min_p=processing.uses_min_p))
        kind = draw(st.sampled_from(("one_hot", "stochastic"))) if given else "one_hot"
        requests.append(RaggedRequest(n, params.temperature, params.top_k, params.top_p, params.min_p, kind))
    scenario = RaggedScenario("hypothesis", vocab, tuple(requests), draft_probs_given=given, processing=processing)
    return RaggedBatch(scenario, draw(st.integers(0, 2**32 - 1)))
