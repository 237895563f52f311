"""Ragged-batch scenarios: requests with their own drafts count and sampling parameters, logits in.

A :class:`RaggedScenario` fixes a call's layout (its requests, each a :class:`RaggedRequest`) and
draws fresh logits and drafts for every call. The logits have clear gaps at every boundary a
request's parameters put in play (the argmax of greedy rows, the k-th logit, the mass where
top-p stops, the ratio where min-p stops), checked on the logits as the sampler sees them, so
implementations that break ties or include a boundary token differently all agree
(:func:`specdec_check.exact.process_logits` states the margins).

How rows are built. Each row gets processed logits ``z`` (what the target law is the softmax of,
before top-k/top-p/min-p): a head of :data:`HEAD_TOKENS` tokens with gaps of at least
:data:`HEAD_GAP_MIN` between consecutive logits, at random token ids, and a tail below it holding
a chosen share of the mass (a few percent to 30%, spread over the rest of the vocabulary). The raw
logits handed over are ``temperature * z`` plus a random offset (``z`` plus the offset for greedy
rows), so every temperature from 0.3 to 2 gives a law with the same shape, and a sampler that
forgets or doubles the temperature sees a very different one. The drafter's law is
``softmax(z + noise)`` (noise N(0, ``draft_noise``^2) per token); a one-hot drafter proposes the
argmax of the same noisy logits (EAGLE top-1, n-gram style) and declares a one-hot law.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from .._ragged_layout import RaggedLayout, ragged_layout
from .._tables import categorical
from ..exact._sampling_params import VLLM_V1_PROCESSING, SamplingProcessing, process_logits

__all__ = ["HEAD_TOKENS", "RaggedDraw", "RaggedRequest", "RaggedScenario", "default_ragged_battery"]

#: Tokens of a row's head (all of them for smaller vocabularies): top-k boundaries are drawn among
#: them (top_k < HEAD_TOKENS), so the k-th and (k+1)-th logits are always separated by a head gap.
HEAD_TOKENS = 32
#: Smallest gap between consecutive head logits (processed units): ``exp(-0.3)`` = 0.74, so
#: neighbouring head tokens differ by a quarter of their mass at least.
HEAD_GAP_MIN = 0.3
#: Extra head gaps are Exp(mean) with a mean drawn per row in this range: flat rows (a broad
#: head) and peaked rows (one token above 0.6) in every call.
HEAD_GAP_MEAN = (0.15, 1.0)
#: Share of a row's mass in its tail (rows without top-p; with top-p at most half of 1 - top_p, so
#: the top-p boundary always falls in the head, where the masses are far apart).
TAIL_SHARE = (0.02, 0.3)
#: Random offset added to every raw logit row (softmax ignores it; a sampler that does not is seen).
LOGIT_OFFSET = 4.0
#: Margins every row must clear, on the logits as the sampler sees them (after its dtype's cast):
#: logit gaps (greedy argmax, top-k) in processed units; top-p in mass; min-p in probability ratio.
#: 0.05 is ~10^5 float32 roundings of a logit of 30 (and 1/3 of a bfloat16 step at 8); 0.005 of mass
#: is ~50x the float32 error of a cumulative sum over 152,064 sorted probabilities.
MIN_LOGIT_GAP = 0.05
MIN_MASS_MARGIN = 0.005
MIN_RATIO_MARGIN = 0.005
#: Rows failing a margin are drawn again, at most this many times (a failing row has probability
#: below 1/2 per draw in every battery request, so 64 rounds fail with probability < 2^-64).
MAX_REDRAWS = 64
#: Largest top-p a request may use: its tail share is at most (1 - top_p) / 2, so 0.95 leaves 2.5%.
MAX_TOP_P = 0.95
#: Largest number of drafts of one request (vLLM v1's MAX_SPEC_LEN is 32, later 128).
MAX_DRAFT_TOKENS = 32
#: Temperatures of random requests (beyond these the logits' scale, not the sampler, is tested).
TEMPERATURE_RANGE = (0.05, 10.0)

DRAFT_KINDS = ("stochastic", "one_hot")


@dataclass(frozen=True)
class RaggedRequest:
    """One request of a ragged call: its drafts count and sampling parameters.

    ``temperature`` 0 is greedy; ``top_k`` 0, ``top_p`` 1.0 and ``min_p`` 0 are off (min-p applies
    only when the scenario's processing declares it). ``draft``: "stochastic" (a law over every
    token) or "one_hot" (the drafter proposes its argmax and declares a one-hot law).
    """

    num_draft_tokens: int
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    draft: str = "stochastic"

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def describe(self) -> str:
        """``greedy, 2 drafts, one-hot`` or ``random, temperature 0.7, top-k 5, top-p 0.9, 3 drafts, stochastic``."""
        parts = ["greedy"] if self.greedy else ["random", f"temperature {self.temperature:g}"]
        if not self.greedy:
            parts.append(f"top-k {self.top_k}" if self.top_k else "top-k off")
            parts.append(f"top-p {self.top_p:g}" if self.top_p < 1 else "top-p off")
            if self.min_p:
                parts.append(f"min-p {self.min_p:g}")
        n = self.num_draft_tokens
        parts.append(f"{n} draft{'s' if n != 1 else ''}")
        parts.append(self.draft.replace("_", "-") + " drafts" if n else "no drafts")
        return ", ".join(parts[:-1]) + (f", {parts[-1]}" if n else "")


@dataclass(frozen=True, eq=False)
class RaggedDraw:
    """One call's inputs as the sampler sees them (float64 values of its dtype) and their exact laws.

    ``target_probs`` [T + B, V]: each target row's processed law (greedy rows one-hot at the
    argmax); ``draft_law`` [T, V]: the law each draft was drawn from (one-hot rows where the
    drafter is one-hot; equal to ``draft_probs`` where those are given).
    """

    draft_token_ids: np.ndarray
    num_draft_tokens: np.ndarray
    draft_probs: np.ndarray | None
    target_logits: np.ndarray
    temperature: np.ndarray
    top_k: np.ndarray
    top_p: np.ndarray
    min_p: np.ndarray | None
    target_probs: np.ndarray = field(repr=False)
    draft_law: np.ndarray = field(repr=False)
    layout: RaggedLayout = field(repr=False)

    def with_logits(self, target_logits) -> "RaggedDraw":
        """The same call with other logits (laws unchanged: for probes whose outputs are judged alone)."""
        return replace(self, target_logits=target_logits)


def _identity(x):
    return x


@dataclass(frozen=True, eq=False)
class RaggedScenario:
    """A ragged call layout: requests (:class:`RaggedRequest`), a vocabulary, a processing order.

    ``draft_probs_given`` False hands ``draft_probs=None`` (every request must then draft one-hot,
    as vLLM's n-gram and EAGLE top-1 drafters do). ``draft_noise`` is the standard deviation of the
    drafter's logit noise (larger: lower acceptance). ``law_tests`` False runs only the exact and
    structural checks and the acceptance and randomness tests (for production vocabularies, where the
    law tests could not reach the mode's resolution in the calls a run can afford: the laws are
    tested on the smaller vocabularies, the indexing and the filters at scale).
    """

    name: str
    vocab_size: int
    requests: tuple
    draft_probs_given: bool = True
    processing: SamplingProcessing = VLLM_V1_PROCESSING
    description: str = ""
    draft_noise: float = 0.8
    seed: int = 0
    law_tests: bool = True

    def __post_init__(self):
        object.__setattr__(self, "requests", tuple(self.requests))
        if not isinstance(self.vocab_size, (int, np.integer)) or self.vocab_size < 2:
            raise ValueError(f"scenario {self.name!r}: vocab_size must be an int >= 2; got {self.vocab_size!r}.")
        if not self.requests:
            raise ValueError(f"scenario {self.name!r}: needs at least one request.")
        if not isinstance(self.processing, SamplingProcessing):
            raise TypeError(f"scenario {self.name!r}: processing must be a SamplingProcessing.")
        head = min(HEAD_TOKENS, self.vocab_size)
        for i, r in enumerate(self.requests):
            where = f"scenario {self.name!r}, request {i}"
            if not isinstance(r, RaggedRequest):
                raise TypeError(f"{where}: requests must be RaggedRequest objects; got {type(r).__name__}.")
            if not isinstance(r.num_draft_tokens, (int, np.integer)) or not 0 <= r.num_draft_tokens <= MAX_DRAFT_TOKENS:
                raise ValueError(f"{where}: num_draft_tokens must be an int in [0, {MAX_DRAFT_TOKENS}].")
            lo, hi = TEMPERATURE_RANGE
            if not (r.temperature == 0 or lo <= r.temperature <= hi):
                raise ValueError(f"{where}: temperature must be 0 (greedy) or in [{lo}, {hi}]; got {r.temperature}.")
            if not isinstance(r.top_k, (int, np.integer)) or not 0 <= r.top_k < head:
                raise ValueError(f"{where}: top_k must be 0 (off) or below {head} (the head of the drawn logits, "
                                 f"where its boundary has a clear gap); got {r.top_k!r}.")
            if not (0 < r.top_p <= MAX_TOP_P or r.top_p == 1.0):
                raise ValueError(f"{where}: top_p must be 1.0 (off) or in (0, {MAX_TOP_P}]; got {r.top_p}.")
            if not 0 <= r.min_p < 1:
                raise ValueError(f"{where}: min_p must lie in [0, 1); got {r.min_p}.")
            if r.min_p and not self.processing.uses_min_p:
                raise ValueError(f"{where}: min_p {r.min_p} is set but the processing {self.processing.describe()} "
                                 "does not apply min-p; declare it in the processing order.")
            if r.draft not in DRAFT_KINDS:
                raise ValueError(f"{where}: draft must be one of {DRAFT_KINDS}; got {r.draft!r}.")
            if not self.draft_probs_given and r.draft != "one_hot" and r.num_draft_tokens:
                raise ValueError(f"{where}: with draft_probs_given=False (draft_probs=None) every request drafts "
                                 "one-hot; set draft='one_hot'.")

    # -- the layout ---------------------------------------------------------------------------------
    @cached_property
    def layout(self) -> RaggedLayout:
        return ragged_layout([r.num_draft_tokens for r in self.requests])

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    @property
    def rows_per_call(self) -> int:
        """Requests per call (a report's "rows")."""
        return len(self.requests)

    @property
    def max_draft_tokens(self) -> int:
        return max(r.num_draft_tokens for r in self.requests)

    @property
    def gamma(self) -> int:
        """The largest number of drafts of a random request (0 when none drafts): the statistical
        checks of drafts apply only when it is positive."""
        return max([r.num_draft_tokens for r in self.requests if not r.greedy] or [0])

    @property
    def greedy_requests(self) -> np.ndarray:
        return np.array([i for i, r in enumerate(self.requests) if r.greedy], dtype=np.int64)

    @property
    def random_requests(self) -> np.ndarray:
        return np.array([i for i, r in enumerate(self.requests) if not r.greedy], dtype=np.int64)

    def describe_request(self, i: int) -> str:
        return f"request {int(i)} ({self.requests[int(i)].describe()})"

    def cells_per_call(self) -> int:
        """Float cells one call hands over: logits [T + B, V] and draft_probs [T, V]."""
        lay = self.layout
        return (lay.num_rows + (lay.num_drafts if self.draft_probs_given else 0)) * self.vocab_size

    # -- drawing ------------------------------------------------------------------------------------
    def _params(self, cast):
        rs = self.requests
        temperature = cast(np.array([r.temperature for r in rs], dtype=np.float64))
        top_k = np.array([r.top_k for r in rs], dtype=np.int64)
        top_p = cast(np.array([r.top_p for r in rs], dtype=np.float64))
        min_p = cast(np.array([r.min_p for r in rs], dtype=np.float64)) if self.processing.uses_min_p else None
        return temperature, top_k, top_p, min_p

    def _processed_logits(self, rng, rows, top_p_rows):
        """``z`` [rows, V]: a gapped head at random ids over a tail holding a drawn share of the mass."""
        vocab = self.vocab_size
        head = min(HEAD_TOKENS, vocab)
        mean = rng.uniform(*HEAD_GAP_MEAN, size=(rows, 1))
        gaps = HEAD_GAP_MIN + rng.exponential(1.0, size=(rows, head - 1)) * mean
        head_z = -np.concatenate([np.zeros((rows, 1)), np.cumsum(gaps, axis=1)], axis=1)
        z = np.empty((rows, vocab))
        if vocab > head:
            tail = -rng.exponential(1.0, size=(rows, vocab - head))
            share = rng.uniform(*TAIL_SHARE, size=rows)
            share = np.where(top_p_rows < 1, np.minimum(share, (1.0 - top_p_rows) / 2), share)
            head_lse = np.log(np.exp(head_z).sum(axis=1))
            tail_lse = np.log(np.exp(tail).sum(axis=1))
            shift = np.log(share / (1 - share)) + head_lse - tail_lse
            shift = np.minimum(shift, head_z[:, -1] - HEAD_GAP_MIN - tail.max(axis=1))  # the tail stays below the head
            # head tokens at random ids: the smallest of fresh keys (small vocabularies: a permutation)
            keys = rng.random((rows, vocab))
            ids = np.argpartition(keys, head - 1, axis=1)[:, :head]
            ids = np.take_along_axis(ids, np.argsort(np.take_along_axis(keys, ids, axis=1), axis=1), axis=1)
            tail_ids = np.ones((rows, vocab), dtype=bool)
            np.put_along_axis(tail_ids, ids, False, axis=1)
            z[tail_ids] = (tail + shift[:, None]).reshape(-1)
            np.put_along_axis(z, ids, head_z, axis=1)
        else:
            ids = np.argsort(rng.random((rows, vocab)), axis=1)
            np.put_along_axis(z, ids, head_z, axis=1)
        return z

    def draw(self, rng: np.random.Generator, *, logit_cast=None, law_rows=None, param_cast=None) -> RaggedDraw:
        """One call's inputs. ``logit_cast`` maps float64 logits to the float64 values of the sampler's
        dtype, ``law_rows`` does the same for probability rows (cast and renormalised),
        ``param_cast`` for temperature/top-p/min-p (None: as they are)."""
        logit_cast = logit_cast or _identity
        law_rows = law_rows or _identity
        param_cast = param_cast or _identity
        lay, vocab = self.layout, self.vocab_size
        temperature, top_k, top_p, min_p = self._params(param_cast)
        req = lay.row_request
        row_t, row_k, row_p = temperature[req], top_k[req], top_p[req]
        row_min_p = None if min_p is None else min_p[req]
        scale = np.where(row_t == 0, 1.0, row_t)[:, None]
        rows = lay.num_rows
        z = self._processed_logits(rng, rows, row_p)
        logits = logit_cast(z * scale + rng.uniform(-LOGIT_OFFSET, LOGIT_OFFSET, size=(rows, 1)))
        probs, margins = process_logits(logits, row_t, row_k, row_p, row_min_p, order=self.processing.order,
                                        margins=True)
        for _ in range(MAX_REDRAWS):
            bad = _failing(margins)
            if not bad.any():
                break
            idx = np.flatnonzero(bad)
            z[idx] = self._processed_logits(rng, idx.size, row_p[idx])
            logits[idx] = logit_cast(z[idx] * scale[idx] + rng.uniform(-LOGIT_OFFSET, LOGIT_OFFSET, size=(idx.size, 1)))
            sub_min_p = None if row_min_p is None else row_min_p[idx]
            probs[idx], sub = process_logits(logits[idx], row_t[idx], row_k[idx], row_p[idx], sub_min_p,
                                             order=self.processing.order, margins=True)
            for name in margins:
                margins[name][idx] = sub[name]
        else:
            bad = _failing(margins)
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise ValueError(f"scenario {self.name!r}: could not draw logits with clear sampling boundaries for "
                                 f"{self.describe_request(req[r])} in {MAX_REDRAWS} tries; lower its top_p or min_p.")
        # the drafter: softmax(z + noise) per draft row; one-hot drafters propose its argmax
        total = lay.num_drafts
        draft_rows = lay.draft_row
        one_hot = np.array([r.draft == "one_hot" for r in self.requests], dtype=bool)[lay.draft_request]
        ids = np.empty(total, dtype=np.int64)
        draft_law = np.zeros((total, vocab))
        if total:
            noisy = z[draft_rows] + rng.normal(0.0, self.draft_noise, size=(total, vocab))
            stochastic = np.flatnonzero(~one_hot)
            if stochastic.size:
                e = np.exp(noisy[stochastic] - noisy[stochastic].max(axis=1, keepdims=True))
                draft_law[stochastic] = law_rows(e / e.sum(axis=1, keepdims=True))
                ids[stochastic] = categorical(draft_law[stochastic], rng)
            hot = np.flatnonzero(one_hot)
            if hot.size:
                ids[hot] = noisy[hot].argmax(axis=1)
                draft_law[hot, ids[hot]] = 1.0
        return RaggedDraw(
            draft_token_ids=ids, num_draft_tokens=lay.num_draft_tokens.copy(),
            draft_probs=draft_law if self.draft_probs_given else None, target_logits=logits,
            temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, target_probs=probs,
            draft_law=draft_law, layout=lay,
        )


def _failing(margins) -> np.ndarray:
    return ((margins["greedy_gap"] < MIN_LOGIT_GAP) | (margins["top_k_gap"] < MIN_LOGIT_GAP)
            | (margins["top_p_margin"] < MIN_MASS_MARGIN) | (margins["min_p_margin"] < MIN_RATIO_MARGIN))


def _r(n, t=1.0, k=0, p=1.0, draft="stochastic", min_p=0.0):
    return RaggedRequest(n, t, k, p, min_p, draft)


def default_ragged_battery(processing: SamplingProcessing = VLLM_V1_PROCESSING) -> list:
    """The ragged battery: every call mixes greedy and random requests (except the all-greedy and
    all-random calls, which take production kernels' separate fast paths), temperatures 0.3 to 2,
    top-k and top-p on and off per request, requests with 0, 1, several and the maximum number of
    drafts, one-hot and stochastic drafts (and ``draft_probs=None``), vocabularies 7 to 152,064.
    With a processing that applies min-p, some random requests set it."""
    m = 0.1 if processing.uses_min_p else 0.0

    def battery_request(n, t=1.0, k=0, p=1.0, draft="stochastic", min_p=0.0):
        return _r(n, t, k, p, draft, min_p if processing.uses_min_p else 0.0)

    q = battery_request
    scenarios = [
        RaggedScenario("ragged-mixed-v7", 7, (
            q(2, 0.7), q(0, 0.0), q(4, 1.0, k=3), q(1, 0.0), q(3, 1.3, p=0.8), q(4, 0.0), q(0, 2.0),
            q(2, 0.3, k=2, p=0.9), q(1, 1.0, min_p=m), q(3, 0.0, draft="one_hot"), q(4, 0.5, draft="one_hot"),
            q(1, 2.0, k=5), q(2, 1.0, p=0.6, draft="one_hot"), q(0, 0.0), q(3, 0.8), q(1, 1.5, k=4, p=0.85),
            q(3, 0.6, k=4), q(1, 1.2, p=0.7), q(4, 1.8), q(2, 0.4, draft="one_hot"), q(0, 1.0, k=2),
            q(3, 1.0, k=5, p=0.9, draft="one_hot"), q(2, 2.0, p=0.85), q(1, 0.3), q(4, 0.9, k=6), q(0, 0.7, p=0.75),
            q(2, 1.4, draft="one_hot", min_p=m), q(3, 1.1, k=3, p=0.8),
        ), processing=processing,
            description="V=7: every parameter combination in one call; stochastic and one-hot draft rows"),
        RaggedScenario("ragged-ngram-v64", 64, (
            q(3, 1.0, draft="one_hot"), q(0, 0.0), q(5, 0.6, k=8, draft="one_hot"), q(1, 0.0, draft="one_hot"),
            q(2, 1.7, p=0.9, draft="one_hot"), q(0, 1.0), q(5, 0.0, draft="one_hot"),
            q(4, 0.4, k=4, p=0.8, draft="one_hot", min_p=m), q(1, 2.0, draft="one_hot"), q(2, 0.0, draft="one_hot"),
            q(3, 1.2, k=16, draft="one_hot"), q(1, 0.9, p=0.7, draft="one_hot"),
            q(2, 0.8, draft="one_hot"), q(4, 1.3, k=10, draft="one_hot"), q(0, 0.5), q(3, 1.9, p=0.85, draft="one_hot"),
            q(1, 0.6, k=3, draft="one_hot"), q(5, 1.0, draft="one_hot"), q(2, 0.0, draft="one_hot"), q(0, 1.4, p=0.9),
            q(3, 0.7, k=20, p=0.75, draft="one_hot", min_p=m), q(1, 1.1, draft="one_hot"), q(4, 0.0, draft="one_hot"),
            q(2, 1.6, k=6, draft="one_hot"),
        ), draft_probs_given=False, processing=processing, draft_noise=0.6,
            description="V=64, draft_probs=None (n-gram / EAGLE top-1 drafters): one-hot drafts throughout"),
        RaggedScenario("ragged-mixed-v1000", 1000, (
            q(7, 1.0), q(0, 0.0), q(1, 0.7, k=20), q(3, 0.0), q(7, 1.4, p=0.9), q(2, 0.3), q(0, 1.1, k=10, p=0.8),
            q(5, 0.0, draft="one_hot"), q(4, 2.0, k=6, draft="one_hot"), q(1, 0.0), q(6, 0.9, p=0.75, min_p=m),
            q(3, 1.0, draft="one_hot"),
            q(2, 0.5, k=12), q(1, 1.6), q(3, 0.8, p=0.85, draft="one_hot"), q(1, 1.2, k=25), q(2, 1.9, p=0.7),
            q(1, 0.4, draft="one_hot"), q(4, 1.0, k=8, p=0.9), q(1, 0.6), q(2, 1.3, draft="one_hot"),
            q(1, 1.0, p=0.8, min_p=m), q(3, 0.7, k=15), q(1, 2.0), q(1, 0.9, k=30), q(2, 1.5, p=0.95),
        ), processing=processing,
            description="V=1000: up to 7 drafts, mixed one-hot and stochastic draft rows"),
        RaggedScenario("ragged-greedy-v256", 256, (
            q(0, 0.0), q(5, 0.0), q(1, 0.0), q(3, 0.0, draft="one_hot"), q(2, 0.0), q(5, 0.0, draft="one_hot"),
            q(4, 0.0), q(0, 0.0),
        ), processing=processing, draft_noise=0.5,
            description="V=256, every request greedy (production kernels' all-greedy path): exact checks only"),
        RaggedScenario("ragged-random-v32000", 32000, (
            q(4, 1.0), q(0, 0.5), q(2, 1.8, k=12), q(4, 0.7, p=0.85), q(1, 1.0, draft="one_hot"),
            q(3, 1.3, k=8, p=0.9, min_p=m),
        ), processing=processing, law_tests=False,
            description="V=32,000, every request random (production kernels' all-random path): contract, events of "
                        "probability zero (a token outside top-k/top-p), acceptance and randomness"),
        RaggedScenario("ragged-qwen-v152064", 152064, (
            q(3, 0.8), q(0, 0.0), q(2, 0.0, draft="one_hot"), q(1, 1.2, k=20, p=0.9), q(3, 0.6, p=0.8),
            q(0, 1.0),
        ), processing=processing, law_tests=False,
            description="V=152,064 (Qwen2): a mixed call at a production vocabulary: greedy rows exactly, events of "
                        "probability zero, acceptance and randomness"),
        RaggedScenario("ragged-zero-drafts-v50", 50, (
            q(0, 1.0), q(3, 0.0), q(0, 0.0), q(0, 0.7, k=5), q(2, 1.0), q(0, 1.6, p=0.8), q(1, 0.0), q(0, 1.0),
            q(0, 0.0), q(3, 0.5), q(0, 1.2),
            q(0, 0.9), q(2, 1.3, k=7), q(0, 0.0), q(0, 0.4, p=0.7), q(1, 1.0), q(0, 1.8, k=3), q(0, 0.0),
            q(4, 0.8, p=0.85), q(0, 1.1), q(0, 0.6, k=10, p=0.9), q(1, 0.0), q(0, 1.5), q(2, 0.0), q(0, 0.3),
            q(0, 1.0, p=0.6),
        ), processing=processing,
            description="V=50: most requests draft nothing, next to requests that do (neighbouring rows)"),
    ]
    return scenarios
