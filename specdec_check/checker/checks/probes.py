"""The probes every verifier kind runs the same way: a row of NaN inputs, and every coin exactly 0.

Neither spends alpha, and neither is a test of exactness: their findings are classed by the policy
table (:mod:`specdec_check.checker.core.policy`), the same in every kind.

- :class:`NonFiniteProbe`: one call whose first row holds a target row of NaN (the kind's caller says
  which row and how to name it). The sampler should raise, or mark the row invalid with -1 everywhere
  (the sync-free choice on a device). Emitting tokens from a NaN law is a robustness finding.
- :class:`ZeroCoinProbe`: one call with a generator whose every uniform is exactly 0, on rows where an
  acceptance of probability zero is offered (a first draft, or a tree's first child, of target
  probability zero). An exact rule accepts only with positive probability, so it must still reject
  there; an inclusive ``coin <= p / q`` accepts (SGLang #35771), and ``torch.multinomial`` returns
  index 0 at probability 0 when its uniform is 0 (EAGLE's and Medusa's final token). A coin is exactly
  0 with probability 2^-24 per float32 draw and 2^-53 per float64 draw: an edge case with that rate,
  which never stops the scenario's law tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..core.policy import zero_coin_rate
from ..core.report import TestRecord
from .base import Check

__all__ = ["NonFiniteCase", "NonFiniteProbe", "ZeroCoinProbe", "zero_generator"]

#: Byte offset of the MT19937 words in torch's CPU generator state (after a 24-byte header).
MT_STATE_OFFSET = 24
#: Leading MT19937 words of the numpy zero generator that are 0 (of 624): 256 float64 uniforms exactly 0,
#: more than the probe's 8 rows of drafts use before the coin it watches; the rest keep a stream that ends
#: numpy's rejection loops (see :func:`zero_generator`).
ZERO_PREFIX_WORDS = 512
#: Seed of the words after the zero prefix (any fixed seed: the probe's output is then reproducible).
ZERO_PREFIX_SEED = 0x2E80
#: Draws that must all be 0 before a torch generator is trusted as all-zero (more than one MT19937 twist).
MT_CHECK_DRAWS = 2048
#: Why a sampler in another process or language (``exec:``, ``lib:``, replayed outputs) gets no zero-coin probe:
#: it is handed a 64-bit seed for its own generator, whose coins the checker cannot set.
SEEDED_ONLY = "the sampler draws from its own generator, seeded with a 64-bit seed: its coins cannot be set to 0"


def zero_generator(backend):
    """A generator of the backend's kind whose uniform draws are exactly 0, or None where the backend's
    generator state cannot be set (devices other than the CPU).

    numpy: the first :data:`ZERO_PREFIX_WORDS` words of an MT19937 are 0 (tempering maps 0 to 0: the first
    256 float64 uniforms, or 512 float32 ones, are exactly 0), then an ordinary stream follows. An all-zero
    state would give zeros forever, and numpy's rejection samplers never return on it: ``gumbel`` redraws
    while ``1 - u == 1``, the normal ziggurat's tail while ``0 <= 0``; an exact sampler drawing them would
    hang the probe. torch (CPU): every word 0; its samplers (``rand``, ``multinomial``, ``exponential_``)
    draw a fixed number of words."""
    if backend.name == "numpy":
        key = np.random.MT19937(ZERO_PREFIX_SEED).state["state"]["key"].copy()
        key[:ZERO_PREFIX_WORDS] = 0
        bits = np.random.MT19937(0)
        bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 0}}  # pos 0: key[0] comes next
        return np.random.Generator(bits)
    if backend.name == "torch" and str(backend.device).startswith("cpu"):
        import torch

        gen = torch.Generator(device="cpu")
        state = gen.get_state().clone()
        # The CPU generator's state starts with (seed u64, left i32, seeded i32, next u64) and then the 624
        # MT19937 words (u64 each): zero the words, keep the header valid (torch checks it).
        state[MT_STATE_OFFSET: MT_STATE_OFFSET + 624 * 8] = 0
        try:
            gen.set_state(state)
            zero = not bool(torch.rand(MT_CHECK_DRAWS, generator=gen).any())
        except RuntimeError:  # pragma: no cover - a torch whose CPU generator state is laid out otherwise
            return None
        if not zero:  # pragma: no cover - idem
            return None
        gen.set_state(state)
        return gen
    return None


@dataclass(frozen=True)
class NonFiniteCase:
    """A kind's NaN probe: the ``draw`` with a NaN target row, the output ``row`` that must be all -1, what
    that row is (``unit``: "row", "request"), the finding's ``message(tokens)`` and its ``evidence``, and
    ``details`` added to the probe's record."""

    draw: object
    row: int
    unit: str
    message: Callable
    evidence: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)


class NonFiniteProbe(Check):
    """One call with a NaN target row (see the module docstring): raise, or -1 for that row."""

    power = "one call; exact (no alpha spent)"

    def start(self) -> None:
        ctx = self.ctx
        if not ctx.selected("non_finite"):
            return
        case = self.caller.non_finite_case()
        out = self.caller.guard.raw(self.caller.inputs(case.draw), ctx.next_seed())
        name = ctx.scenario.name
        if isinstance(out, Exception):  # raising on NaN input is the right answer
            ctx.recorder.record(TestRecord(name, "non_finite", "non-finite input probe", True, 0.0, 1,
                                           details={"behaviour": f"raised {type(out).__name__}", **case.details}))
            return
        row = np.asarray(out)[case.row] if np.ndim(out) == 2 and np.shape(out)[0] > case.row else None
        passed = row is not None and bool((row == -1).all())
        behaviour = f"returned -1 for the {case.unit}" if passed else "emitted tokens"
        ctx.recorder.record(TestRecord(name, "non_finite", "non-finite input probe", passed, 0.0, 1,
                                       details={"behaviour": behaviour, **case.details}))
        if not passed:
            tokens = None if row is None else row.tolist()
            ctx.recorder.robustness("non_finite", case.message(tokens), {**case.evidence, "output": tokens})


def _first_row(out):
    """The first output row as a list, or what ``out`` is when it has no rows (None, a scalar, an empty array)."""
    if np.ndim(out) >= 1 and np.shape(out)[0] > 0:
        return np.asarray(out)[0].tolist()
    return f"{type(out).__name__} of shape {np.shape(out)}" if out is not None else "None"


class ZeroCoinProbe(Check):
    """One call with every coin exactly 0 (see the module docstring)."""

    power = "one call; exact (no alpha spent)"

    def start(self) -> None:
        ctx, caller = self.ctx, self.caller
        if not ctx.selected("zero_coins"):
            return
        generator = zero_generator(ctx.backend)
        why = (f"no all-zero generator on device {ctx.backend.device}" if generator is None
               else SEEDED_ONLY if getattr(caller.guard.sampler, "seeded_only", False)
               else caller.zero_coin_unsupported())
        if why:
            ctx.recorder.skipped("zero_coins", why)
            return
        draw = caller.zero_coin_draw()  # built from the scenario, not from its stream: no later draw moves
        out = caller.guard.raw(caller.inputs(draw), generator)
        name = ctx.scenario.name
        if isinstance(out, Exception):
            ctx.recorder.record(TestRecord(name, "zero_coins", "zero-coin probe (SGLang #35771)", True, 0.0, 1,
                                           details={"behaviour": f"raised {type(out).__name__} on an all-zero generator"}))
            return
        problem = caller.zero_coin_problem(draw, np.asarray(out))
        ctx.recorder.record(TestRecord(name, "zero_coins", "zero-coin probe (SGLang #35771)", problem is None, 0.0, 1,
                                       details={"output": _first_row(out)}))
        if problem is not None:
            message, evidence = problem
            rate = zero_coin_rate(ctx.backend.dtype)
            ctx.recorder.edge_case("zero_coins", f"with every coin exactly 0 (an edge case: a uniform is exactly 0 with "
                                   f"probability {rate}; SGLang #35771 saw it in production): {message}",
                                   {**evidence, "rate": rate})
