"""The caller of a decode loop on real models: prompts in, the contract of what comes back, the target's forward
passes counted (a forward hook on a torch module, a counting wrapper otherwise)."""

from __future__ import annotations

import numpy as np

from ..core.guard import Guard
from ..generator.caller import padding_note

__all__ = ["ModelLoopCaller", "TargetCounter"]


class TargetCounter:
    """Counts the target's forward passes while a call runs: a forward hook on a ``torch.nn.Module`` target; a
    callable target is counted by the wrapper the loop is handed instead (:meth:`wrapped`)."""

    def __init__(self, target):
        self.target, self.calls, self._hook = target, 0, None
        register = getattr(target, "register_forward_hook", None)
        if callable(register):
            self._hook = register(self._count)

    def _count(self, *_):
        self.calls += 1

    def wrapped(self):
        """What the loop is handed as ``target``: the module itself (hooked), or a counting proxy (its calls
        counted, every attribute the target's own: an mlx module's ``layers`` and ``make_cache`` included)."""
        if self._hook is not None or not callable(self.target):
            return self.target
        return _CountingProxy(self.target, self)

    def close(self):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None


class _CountingProxy:
    """A callable target's stand-in: counts each call in ``counter.calls``; other attributes are the target's."""

    def __init__(self, target, counter):
        self.__dict__["_target"], self.__dict__["_counter"] = target, counter

    def __call__(self, *args, **kwargs):
        self._counter.calls += 1
        return self._target(*args, **kwargs)

    def __getattr__(self, name):
        if name in ("_target", "_counter"):  # not set yet (a copy or unpickling in progress)
            raise AttributeError(name)
        return getattr(self._target, name)

    def __setattr__(self, name, value):
        setattr(self._target, name, value)  # what a loop sets on its target, the target keeps


class ModelLoopCaller:
    """Calls ``generate(*, target, draft, prompts, max_new_tokens, gamma, generator)`` on prompts of the scenario."""

    def __init__(self, ctx, generate, kind):
        self.ctx, self.generate, self.kind = ctx, generate, kind
        self.scenario = ctx.scenario
        self.guard = Guard(ctx, generate, role="decode loop", watched=("prompts",), explain=padding_note)
        self.counter = TargetCounter(kind.target)

    def draw(self, rows=None):
        s = self.scenario
        return self.ctx.rng.integers(0, len(s.prompts), size=rows or s.rows_per_call)

    def _parse(self, out, shape):
        s, vocab = self.scenario, self.kind.oracle.vocab_size
        out = np.asarray(out)
        if out.shape != shape:
            return (f"output shape {out.shape} != [B, max_new_tokens] = {shape}", {}), None
        if not np.issubdtype(out.dtype, np.integer):
            return (f"output dtype {out.dtype} is not an integer type", {}), None
        for r, row in enumerate(out):
            stop = np.flatnonzero(np.isin(row, s.stop_tokens))[:1]
            end = int(stop[0]) + 1 if len(stop) else row.size
            body, tail = row[:end], row[end:]
            if ((body < 0) | (body >= vocab)).any():
                col = int(np.flatnonzero((body < 0) | (body >= vocab))[0])
                why = "" if s.eos_token_id is not None else " (no stop token was given: every position is a token)"
                return (f"token {int(body[col])} at row {r}, position {col} is not in [0, {vocab}){why}", {}), None
            if (tail != -1).any():
                col = end + int(np.flatnonzero(tail != -1)[0])
                return (f"row {r} emitted token {int(row[col])} at position {col}, after the stop token "
                        f"{int(row[end - 1])} at position {end - 1} (a loop ends a row at its stop token)", {}), None
        return None, out.astype(np.int64, copy=False)

    def call(self, index, seed, check="contract"):
        s = self.scenario
        prompts = s.padded(index)
        kwargs = {"target": self.counter.wrapped(), "draft": self.kind.draft, "prompts": prompts,
                  "max_new_tokens": s.max_new_tokens, "gamma": s.gamma}
        shape = (prompts.shape[0], s.max_new_tokens)
        return self.guard.call(kwargs, seed, check=check, parse=lambda out: self._parse(out, shape))

    def call_host(self, index, seed, check="contract"):
        return self.call(index, seed, check)[0]

    # -- what the shared checks ask of a kind ---------------------------------------------------------
    def replay_draw(self):
        return self.draw()

    def rows_of(self, index) -> int:
        return int(len(index))

    def replay_difference(self, row, first, second) -> tuple:
        return (f"row {row}: two calls with the same generator state on the same prompts gave {first} and {second}: "
                "the decode loop uses randomness other than its generator", {"row": row, "first": first,
                                                                              "second": second})
