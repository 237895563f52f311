"""Structural probes of a tree verifier: non-finite inputs, and coins forced to exactly zero.

Neither spends alpha. The zero-coin probe reproduces SGLang #35771: a float32 ``torch.rand``
returns exactly 0 with probability 2^-24 per coin, and a rule that accepts a child iff
``coin <= S / threshold`` then accepts a child of target probability zero (``0 <= 0``). The
probe hands the verifier a generator whose every draw is 0 (an MT19937 whose state is all
zeros: its twist and tempering map zeros to zeros) on trees whose root's first child has
target probability zero. An exact rule accepts a child only when its acceptance probability is
positive, so at coin 0 it must still reject that child; any emission of probability zero is a
failure.
"""

from __future__ import annotations

import numpy as np

from ...exact._tree_kernels import slot_parents
from ...scenarios import TreeDraw
from .._report import TestRecord
from ._tree_laws import tree_impossible

__all__ = ["TreeNonFiniteProbe", "ZeroCoinProbe", "zero_generator"]

#: Rows of the zero-coin probe's call (identical rows: one is enough, a few show a batch path too).
ZERO_COIN_ROWS = 8
#: Byte offset of the MT19937 words in torch's CPU generator state (after a 24-byte header).
MT_STATE_OFFSET = 24
#: Draws that must all be 0 before a torch generator is trusted as all-zero (more than one MT19937 twist).
MT_CHECK_DRAWS = 2048


def zero_generator(backend):
    """A generator of the backend's kind whose every uniform draw is exactly 0, or None where the
    backend's generator state cannot be set (devices other than the CPU)."""
    if backend.name == "numpy":
        bits = np.random.MT19937(0)
        bits.state = {"bit_generator": "MT19937", "state": {"key": np.zeros(624, dtype=np.uint32), "pos": 624}}
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


def zero_coin_draw(scenario, drafting: str, law_rows=None) -> TreeDraw:
    """Probe rows on the scenario's first tree shape: the root's target gives token 0 probability zero
    and the draft ranks tokens 0, 1, 2, ... first, so the root's first child (node 0) is token 0
    under every scheme; every other row is uniform, and every node's children are 0, 1, 2, ... (modulo V)."""
    parents = scenario.trees[:1]
    nodes, vocab = parents.shape[1], scenario.vocab_size
    slot_parent = slot_parents(parents)[0]
    target = np.full((nodes + 1, vocab), 1.0 / vocab)
    draft = target.copy()
    target[0] = np.r_[0.0, np.full(vocab - 1, 1.0 / (vocab - 1))]
    rank = 1.0 / np.arange(1, vocab + 1)
    draft[0] = rank / rank.sum()
    ids = np.zeros(nodes, dtype=np.int64)
    seen = {}
    for i in range(nodes):
        u = slot_parent[i + 1]
        ids[i] = seen.get(u, 0) % vocab  # more siblings than tokens (i.i.d. drafts only): tokens repeat
        seen[u] = ids[i] + 1
    cast = law_rows if law_rows is not None else (lambda r: r)
    tile = (ZERO_COIN_ROWS, 1, 1)
    return TreeDraw(np.repeat(parents, ZERO_COIN_ROWS, axis=0), np.repeat(ids[None], ZERO_COIN_ROWS, axis=0),
                    np.tile(cast(draft[None]), tile), np.tile(cast(target[None]), tile),
                    np.zeros(ZERO_COIN_ROWS, dtype=np.int64))


class ZeroCoinProbe:
    """One call with every coin exactly 0 on rows whose root's first child has target probability zero."""

    power = "one call of 8 rows; exact (no alpha spent)"

    def __init__(self, run, caller):
        self.run, self.caller = run, caller

    def start(self) -> None:
        run, caller = self.run, self.caller
        if not run.selected("zero_coins"):
            return
        name = run.scenario.name
        generator = zero_generator(run.backend)
        if generator is None:
            run.note_skipped("zero_coins", f"no all-zero generator on device {run.backend.device}")
            return
        if run.scenario.vocab_size < 2:
            run.note_skipped("zero_coins", "needs a vocabulary of at least 2 tokens")
            return
        draw = zero_coin_draw(run.scenario, caller.drafting, caller.law_rows)
        out = caller.call_raw(draw, 0, generator=generator)
        if isinstance(out, Exception):
            run.record(TestRecord(name, "zero_coins", "zero-coin probe (SGLang #35771)", True, 0.0, 1,
                                  details={"behaviour": f"raised {type(out).__name__} on an all-zero generator"}))
            return
        block = caller.block(draw)
        problem, parsed = block.parse(np.asarray(out))
        if problem is not None:
            run.fail("contract", f"with every coin 0 (zero-coin probe): {problem[0]}", problem[1])
            run.stopped = True
            passed = False
        else:
            passed = tree_impossible(run, block, np.asarray(out), parsed, tolerance=0.0,
                                     label=" with every coin exactly 0 (zero-coin probe: a float32 torch.rand returns "
                                           "0 with probability 2^-24; SGLang #35771)")
        run.record(TestRecord(name, "zero_coins", "zero-coin probe (SGLang #35771)", bool(passed), 0.0, 1,
                              details={"output": np.asarray(out)[0].tolist()}))


class TreeNonFiniteProbe:
    """Row 0 gets an all-NaN root target row (always read): the verifier must raise or return -1s there."""

    power = "one call; exact (no alpha spent)"

    def __init__(self, run, caller):
        self.run, self.caller = run, caller

    def start(self) -> None:
        run = self.run
        if not run.selected("non_finite"):
            return
        draw = self.caller.draw()
        target = draw.target_probs.copy()
        target[0, 0, :] = np.nan
        bad = TreeDraw(draw.parents, draw.draft_token_ids, draw.draft_probs, target, draw.pool_index)
        out = self.caller.call_raw(bad, run.next_seed())
        name = run.scenario.name
        if isinstance(out, Exception):
            run.record(TestRecord(name, "non_finite", "non-finite input probe", True, 0.0, 1,
                                  details={"behaviour": f"raised {type(out).__name__}"}))
            return
        row = np.asarray(out)[0] if np.ndim(out) == 2 else None
        passed = row is not None and bool((row == -1).all())
        run.record(TestRecord(name, "non_finite", "non-finite input probe", passed, 0.0, 1,
                              details={"behaviour": "returned -1 for the row" if passed else "emitted tokens"}))
        if not passed:
            run.fail("non_finite", "a row whose root target row is all NaN was silently turned into tokens "
                     f"{None if row is None else row.tolist()}; raise an error or return -1 for such a row",
                     {"row": 0, "output": None if row is None else row.tolist()})
