"""The ragged call protocol: drawing a call, handing it to the sampler's array world, the contract.

A :class:`RaggedCaller` owns everything between a :class:`~specdec_check.scenarios.RaggedScenario`
and one call of the ragged verifier: the casts the sampler's dtype implies (logits, probability
rows and the float parameters are drawn as the sampler will see them, so the exact laws are
those of what it is handed), the inputs on the backend (read-only numpy views; torch tensors on
the device), the sampler's exceptions and writes into its inputs, and the per-request contract.
Outputs are small ([B, max(n) + 1] ids), so they are always judged on the host.
"""

from __future__ import annotations

import numpy as np

from ._caller import _traceback
from ._ragged_contract import check_ragged_output

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
    (:meth:`~specdec_check.checker._backend.Backend.law_rows`).
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
    """Calls a ragged verifier on draws of one scenario, for one :class:`ScenarioRun` (``run``).

    A call that raises, writes into its inputs or breaks the contract becomes a finding and stops
    the scenario (``run.stopped``); such calls return ``(None, None)``.
    """

    def __init__(self, run, verify):
        self.run, self.verify = run, verify
        self.scenario, self.backend = run.scenario, run.backend
        self.logit_cast, self.law_rows, self.param_cast = casts(self.backend)
        self.reuse = 1  # calls one drawn call serves in the probes' draws (:meth:`reused_draw`); set by the kind
        self._reused = (None, 0)

    def draw(self):
        """A fresh call's inputs, drawn from the scenario's stream as the sampler will see them."""
        return self.scenario.draw(self.run.rng, logit_cast=self.logit_cast, law_rows=self.law_rows,
                                  param_cast=self.param_cast)

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
        run, backend, s = self.run, self.backend, self.scenario
        kwargs = self.inputs(draw)
        watch = run.selected("contract")
        before = {k: backend.fingerprint(v) for k, v in kwargs.items() if v is not None} if watch else None
        run.calls += 1
        try:
            out = run.sampler_call(self.verify, **kwargs, generator=backend.generator(seed))
        except Exception as exc:  # the verifier's own error becomes a finding
            tb = _traceback(exc)
            if backend.read_only_inputs and ("read-only" in str(exc) or "WRITEABLE" in str(exc)):
                run.fail("contract", f"the verifier modified one of its inputs in place ({type(exc).__name__} on the "
                         f"read-only inputs: {exc})", {"traceback": tb})
            else:
                run.fail(check, f"the verifier raised {type(exc).__name__}: {exc}", {"traceback": tb})
            run.stopped = True
            return None, None
        if before is not None:  # content fingerprints: a write that went around numpy's read-only flag too
            changed = [k for k in before if backend.fingerprint(kwargs[k]) != before[k]]
            if changed:
                run.fail("contract", f"the verifier modified its input(s) {changed} in place", {"modified": changed})
                run.stopped = True
                return None, None
        try:
            out = backend.copy(out)  # a static output buffer would otherwise change under the kept outputs
        except Exception:  # noqa: BLE001 - not an array at all: to_host below names the problem
            pass
        try:
            out = backend.to_host(out)
        except Exception as exc:  # noqa: BLE001 - whatever the sampler returned, it is not an integer array
            run.fail("contract", f"the verifier's output could not be read as an integer array: {exc}")
            run.stopped = True
            return None, None
        problem, step = check_ragged_output(out, draw.draft_token_ids, draw.layout, s.vocab_size, s.describe_request)
        if problem is not None:
            run.fail("contract", problem[0], problem[1])
            run.stopped = True
            return None, None
        return out.astype(np.int64, copy=False), step

    def call_raw(self, draw, seed):
        """One call whose output the caller judges itself (probes): the host output, or the exception raised."""
        kwargs = self.inputs(draw)
        self.run.calls += 1
        try:
            return self.backend.to_host(self.run.sampler_call(self.verify, **kwargs,
                                                              generator=self.backend.generator(seed)))
        except Exception as exc:  # noqa: BLE001 - the probe judges any exception
            return exc
