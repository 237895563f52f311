"""The ragged verifier's caller: drawing a call, handing it to the sampler's array world, the contract.

A :class:`RaggedCaller` owns everything between a :class:`~specdec_check.scenarios.RaggedScenario`
and one call of the ragged verifier: the casts the sampler's dtype implies (logits, probability
rows and the float parameters are drawn as the sampler will see them, so the exact laws are
those of what it is handed), the inputs on the backend (read-only numpy views; torch tensors on
the device) and the per-request contract; the call itself is guarded by
:class:`~specdec_check.checker.core.guard.Guard`, as for every kind. Outputs are small
([B, max(n) + 1] ids), so they are always judged on the host.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np

from ..chain.contract import ParsedStep, impossible_events
from ..checks.probes import NonFiniteCase
from ..core.guard import Guard
from .block import RaggedBlock
from .contract import check_ragged_output

__all__ = ["RAGGED_INPUTS", "RaggedCaller", "ragged_inputs"]

#: The array inputs of a ragged call, in contract order (``min_p`` only where the processing applies it).
RAGGED_INPUTS = ("draft_token_ids", "num_draft_tokens", "draft_probs", "target_logits", "temperature", "top_k",
                 "top_p", "min_p")


def _torch_world(backend):
    """``(torch, device, float dtype, parameter dtype)`` of a torch backend."""
    import torch

    dtype = backend.torch_dtype
    return torch, backend.torch_device, dtype, torch.float64 if dtype == torch.float64 else torch.float32


def casts(backend):
    """``(logit_cast, law_rows, param_cast)``: float64 values as the sampler sees them on ``backend``.

    numpy: unchanged. torch: logits and parameters rounded to the sampler's dtype (parameters to
    float32 unless the dtype is float64, as vLLM keeps them), probability rows cast and renormalised
    (:meth:`~specdec_check.checker.backends.base.Backend.law_rows`).
    """
    if backend.name == "numpy":
        return None, None, None
    if backend.name != "torch":
        raise NotImplementedError(f"the ragged checker runs on the numpy and torch backends; got {backend.name!r}.")
    torch, _, dtype, param_dtype = _torch_world(backend)

    def logit_cast(x):
        return torch.from_numpy(np.ascontiguousarray(x)).to(dtype).to(torch.float64).numpy()

    def param_cast(x):
        return torch.from_numpy(np.ascontiguousarray(x)).to(param_dtype).to(torch.float64).numpy()

    return logit_cast, backend.law_rows, param_cast


def ragged_inputs(backend, draw) -> dict:
    """Keyword arguments of a ragged call on ``backend`` (minus ``generator``).

    numpy: read-only views (a write raises inside the sampler). torch: int64 ids and counts,
    logits and probabilities in the backend's dtype, parameters in float32 (float64 with a float64
    dtype), top-k int64, all on the backend's device.
    """
    values = {"draft_token_ids": draw.draft_token_ids, "num_draft_tokens": draw.num_draft_tokens,
              "draft_probs": draw.draft_probs, "target_logits": draw.target_logits,
              "temperature": draw.temperature, "top_k": draw.top_k, "top_p": draw.top_p}
    if draw.min_p is not None:
        values["min_p"] = draw.min_p
    if backend.name == "numpy":
        views = {}
        for name, array in values.items():
            if array is None:
                views[name] = None
                continue
            view = array.view()
            view.setflags(write=False)
            views[name] = view
        return views
    torch, device, dtype, param_dtype = _torch_world(backend)
    kinds = {"draft_token_ids": torch.int64, "num_draft_tokens": torch.int64, "top_k": torch.int64,
             "draft_probs": dtype, "target_logits": dtype, "temperature": param_dtype, "top_p": param_dtype,
             "min_p": param_dtype}
    return {name: None if array is None else
            torch.from_numpy(np.ascontiguousarray(array)).to(kinds[name]).to(device) for name, array in values.items()}


class RaggedCaller:
    """Calls a ragged verifier on draws of one scenario's run ``ctx`` (through its :class:`Guard`).

    A call that raises, writes into its inputs or breaks the contract becomes a finding and stops
    the scenario; such calls return ``(None, None)``.
    """

    def __init__(self, ctx, verify, *, reuse: int = 1, degenerate=None):
        self.ctx, self.verify = ctx, verify
        self.scenario, self.backend = ctx.scenario, ctx.backend
        self.guard = Guard(ctx, verify, role="verifier", watched=RAGGED_INPUTS, degenerate=degenerate)
        self.logit_cast, self.law_rows, self.param_cast = casts(self.backend)
        self.reuse = reuse  # calls one drawn call serves in the probes' draws (:meth:`reused_draw`)
        self._reused = (None, 0)

    def draw(self, rng=None):
        """A fresh call's inputs, drawn from the scenario's stream (or ``rng``) as the sampler will see them."""
        return self.scenario.draw(self.ctx.rng if rng is None else rng, logit_cast=self.logit_cast,
                                  law_rows=self.law_rows, param_cast=self.param_cast)

    def reused_draw(self):
        """A drawn call for probes and randomness checks, shared by up to :attr:`reuse` of them (their
        verdicts hold given the inputs, and drawing a large-vocabulary call costs more than calling it)."""
        draw, uses = self._reused
        if draw is None or uses >= self.reuse:
            draw, uses = self.draw(), 0
        self._reused = (draw, uses + 1)
        return draw

    def inputs(self, draw) -> dict:
        return ragged_inputs(self.backend, draw)

    def call(self, draw, seed, check="contract"):
        """Run the verifier on ``draw``: ``(output int64 [B, max(n) + 1] on the host, parsed step)``,
        or ``(None, None)`` after a finding that stops the scenario."""
        s = self.scenario
        out, step = self.guard.call(self.inputs(draw), seed, check=check, draw=draw, parse=lambda out: check_ragged_output(
            out, draw.draft_token_ids, draw.layout, s.vocab_size, s.describe_request))
        return (None, None) if out is None else (out.astype(np.int64, copy=False), step)

    def call_host(self, draw, seed, check="contract"):
        return self.call(draw, seed, check)[0]

    # -- what the shared checks ask of a kind ---------------------------------------------------------
    def non_finite_case(self) -> NonFiniteCase:
        """The first target row of one request (a random one when there is one) is all NaN. (-inf logits are
        legitimate: masked tokens.)"""
        s = self.scenario
        draw = self.reused_draw()
        request = int((s.random_requests if len(s.random_requests) else s.greedy_requests)[0])
        logits = draw.target_logits.copy()
        logits[draw.layout.row_start[request]] = np.nan
        return NonFiniteCase(draw.with_logits(logits), request, "request", lambda tokens: (
            f"{s.describe_request(request)}: its first target row of logits is all NaN, and the verifier silently "
            f"emitted {tokens}; raise an error or return -1 for such a request"), {"request": request},
            {"request": request})

    def zero_coin_unsupported(self) -> str | None:
        if self.scenario.vocab_size < 2:
            return "needs a vocabulary of at least 2 tokens"
        if self._zero_coin_draw() is None:
            return "no random request here offers a draft of target probability zero"
        return None

    def _zero_coin_draw(self):
        """A call drawn on its own stream (keyed by the scenario's name: no later draw of the scenario moves)
        whose random requests' first drafts are tokens the processed target gives probability zero and the
        draft positive probability (where a request has such a token); None where no request has one."""
        if not hasattr(self, "_zero_draw"):
            draw = self.draw(np.random.default_rng([0x2E80, zlib.crc32(self.scenario.name.encode())]))
            ids, law = draw.draft_token_ids.copy(), draw.draft_law.copy()
            lay, changed = draw.layout, False
            for r in np.flatnonzero(draw.temperature > 0):
                if not lay.num_draft_tokens[r]:
                    continue
                flat, row = int(lay.draft_start[r]), int(lay.row_start[r])
                candidates = np.flatnonzero((draw.target_probs[row] == 0) & (law[flat] > 0 if draw.draft_probs
                                                                               is not None else True))
                if candidates.size:
                    ids[flat] = int(candidates[0])
                    if draw.draft_probs is None:  # a one-hot drafter proposes the token with probability 1
                        law[flat] = 0.0
                        law[flat, ids[flat]] = 1.0
                    changed = True
            self._zero_draw = replace(draw, draft_token_ids=ids, draft_law=law,
                                      draft_probs=None if draw.draft_probs is None else law) if changed else None
        return self._zero_draw

    def zero_coin_draw(self):
        return self._zero_coin_draw()

    def zero_coin_problem(self, draw, out):
        """``(message, evidence)`` when ``out`` is malformed or a random request emits an event of probability
        zero (at tolerance 0: the drafts the probe offers have target probability exactly 0), else None."""
        s = self.scenario
        problem, parsed = check_ragged_output(out, draw.draft_token_ids, draw.layout, s.vocab_size, s.describe_request)
        if problem is not None:
            return problem
        for group in RaggedBlock(draw).groups:
            req, vb = group.requests, group.block
            step = ParsedStep(parsed.accepted[req], parsed.final[req], parsed.emitted[req])
            events = impossible_events(step, vb.draw.draft_token_ids, vb.draw.draft_probs, vb.draw.target_probs,
                                       tolerance=0.0)
            if events:
                message, evidence = events[0]
                request = int(req[evidence["row"]])
                return f"{s.describe_request(request)}: {message}", {**evidence, "request": request}
        return None

    def replay_draw(self):
        return self.reused_draw()

    def rows_of(self, draw) -> int:
        return self.scenario.num_requests

    def replay_difference(self, row, first, second) -> tuple:
        return (f"{self.scenario.describe_request(row)}: two calls with the same generator state on the same inputs "
                f"gave {first} and {second}: the verifier uses randomness other than its generator",
                {"request": row, "first": first, "second": second})
