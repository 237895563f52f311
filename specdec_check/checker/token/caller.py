"""The token sampler's caller: one call's inputs on the backend (a table of rows, or a row per output), the
parameters of each output, and the output contract (the call itself is guarded by
:class:`~specdec_check.checker.core.guard.Guard`, as for every kind)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.guard import Guard

__all__ = ["TokenCaller", "TokenDraw", "token_inputs"]


@dataclass(frozen=True, eq=False)
class TokenDraw:
    """One call: ``rows`` [B], the scenario row each output is drawn from."""

    rows: np.ndarray

    def head(self, count):
        return TokenDraw(self.rows[count] if isinstance(count, (slice, np.ndarray)) else self.rows[:count])


class RoundTo:
    """The values a backend hands a sampler, as float64 (hashable: a scenario memoises its laws per cast)."""

    def __init__(self, backend):
        self.key = (backend.name, backend.dtype)
        self.backend = backend

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, RoundTo) and other.key == self.key

    def __call__(self, values):
        if self.backend.name == "numpy" or self.backend.dtype == "float64":
            return values
        import torch

        return torch.tensor(values).to(self.backend.torch_dtype).to(torch.float64).numpy()


def token_inputs(backend, scenario, rows: np.ndarray) -> dict:
    """Keyword arguments of a call on ``backend`` (minus ``generator``): the values (the whole table with
    ``indices``, else one row per output), one parameter per output for each step of the processing.

    numpy: read-only float64 values and parameters, int64 top_k and indices. torch: values in the backend's
    dtype, float parameters in float32 (float64 with a float64 dtype), int64 top_k and indices, on the device.
    """
    processing = scenario.processing
    values = scenario.values if processing.indices else scenario.values[rows]
    arrays = {processing.inputs: values, **{step: scenario.params[step][rows] for step in processing.order}}
    if processing.indices:
        arrays["indices"] = rows.astype(np.int64)
    if backend.name == "numpy":
        out = {}
        for name, array in arrays.items():
            view = np.ascontiguousarray(array)
            view = view if view is not array else view.view()
            view.setflags(write=False)
            out[name] = view
        return out
    import torch

    dtype = backend.torch_dtype
    param = torch.float64 if dtype == torch.float64 else torch.float32
    kinds = {"top_k": torch.int64, "indices": torch.int64, processing.inputs: dtype}
    return {name: torch.tensor(array).to(kinds.get(name, param)).to(backend.torch_device)
            for name, array in arrays.items()}  # a copy: the scenario's table is read-only


class TokenCaller:
    """Calls a token sampler on draws of one scenario's run ``ctx``; ``laws`` are the scenario's exact laws of
    the values as the backend hands them."""

    def __init__(self, ctx, sample, *, degenerate=None):
        self.ctx, self.sample = ctx, sample
        self.scenario, self.backend = ctx.scenario, ctx.backend
        processing = self.scenario.processing
        watched = (processing.inputs, *processing.order, *(("indices",) if processing.indices else ()))
        self.guard = Guard(ctx, sample, role="token sampler", watched=watched, degenerate=degenerate)
        self.laws = self.scenario.laws(RoundTo(self.backend))

    def draw(self, rows=None, rng=None) -> TokenDraw:
        """Outputs drawn from uniformly chosen scenario rows (``rows`` of them; default the call size)."""
        rng = self.ctx.rng if rng is None else rng
        count = self.scenario.outputs_per_call() if rows is None else rows
        return TokenDraw(rng.integers(0, self.scenario.rows, size=count))

    def inputs(self, draw) -> dict:
        return token_inputs(self.backend, self.scenario, draw.rows)

    def _parse(self, out, count: int):
        vocab = self.scenario.vocab_size
        out = np.asarray(out)
        if out.shape == (count, 1):
            out = out[:, 0]  # [B, 1] (torch.multinomial's shape) is one token per output
        if out.shape != (count,):
            return (f"output shape {out.shape} != [B] = ({count},): one token per output", {}), None
        if not np.issubdtype(out.dtype, np.integer):
            return (f"output dtype {out.dtype} is not an integer type", {}), None
        bad = (out < 0) | (out >= vocab)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return (f"token {int(out[i])} of output {i} is not in [0, {vocab})", {"output": i}), None
        return None, out.astype(np.int64, copy=False)

    def call(self, draw, seed, check="contract"):
        """``(tokens int64 [B], tokens)`` on the host, or ``(None, None)`` after a finding that stops the scenario."""
        count = int(draw.rows.shape[0])
        return self.guard.call(self.inputs(draw), seed, check=check, parse=lambda out: self._parse(out, count))

    def call_host(self, draw, seed, check="contract"):
        out = self.call(draw, seed, check)[0]
        return None if out is None else out[:, None]  # [B, 1]: the shared randomness checks compare rows

    # -- what the shared checks ask of a kind ---------------------------------------------------------
    def replay_draw(self):
        return self.draw()

    def rows_of(self, draw) -> int:
        return int(draw.rows.shape[0])

    def replay_difference(self, output, first, second) -> tuple:
        return (f"output {output}: two calls with the same generator state on the same inputs gave tokens {first} "
                f"and {second}: the token sampler uses randomness other than its generator",
                {"output": output, "first": first, "second": second})
