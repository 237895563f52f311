"""The tree verifier's caller: drawing trees, its inputs, and parsing its outputs (the call itself is guarded
by :class:`~specdec_check.checker.core.guard.Guard`, as for every kind). Outputs are always brought to the host
(tree laws are gathered there).
"""

from __future__ import annotations

import numpy as np

from ...exact._tree_kernels import slot_parents
from ...scenarios import TreeDraw
from ..checks.probes import NonFiniteCase
from ..core.guard import Guard
from .block import TreeBlock
from .contract import describe_impossible, impossible_rows

__all__ = ["TreeCaller", "TreePool"]

#: The tree verifier's array inputs (their content must not change during a call).
INPUTS = ("parents", "draft_token_ids", "draft_probs", "target_probs")
#: Rows of the zero-coin probe's call (identical rows: one is enough, a few show a batch path too).
ZERO_COIN_ROWS = 8
#: Calls are drawn together, up to this many cells of per-row law state per pooled draw (8 MiB of
#: float64): drawing and the laws' per-node loop have a fixed cost per draw that dominates small calls.
#: Keyed laws under the i.i.d. and top-k rules keep a few numbers per slot (their residual rows are
#: shared: :mod:`specdec_check.exact._tree_keyed`); without replacement, or dense rows, one row of V.
POOL_CELLS = 1 << 20
#: ... and at most this many calls per pooled draw.
POOL_CALLS = 64


def law_cells_per_row(scenario, rule) -> int:
    """Cells of law state one row of ``scenario`` costs a pooled draw under ``rule`` (see :data:`POOL_CELLS`)."""
    slots = scenario.nodes + 1
    return slots if scenario.keyed and rule in ("iid", "topk") else slots * scenario.vocab_size


class TreePool:
    """Blocks of ``rows`` rows cut from pooled draws of several calls (their laws computed once per draw)."""

    def __init__(self, caller: "TreeCaller", rows=None, *, windows: int):
        s = caller.scenario
        self.caller = caller
        self.width = s.rows_per_call if rows is None else max(1, min(int(rows), s.rows_per_call))
        cells = self.width * law_cells_per_row(s, caller.rule)
        self.most = int(max(1, min(POOL_CALLS, POOL_CELLS // cells)))
        self.remaining = max(1, int(windows))
        self.block, self.left, self.at = None, 0, 0

    def next(self) -> TreeBlock:
        if not self.left:
            calls = max(1, min(self.most, self.remaining))
            self.remaining -= calls
            draw = self.caller.draw(rows=self.width, calls=calls)
            self.block, self.left, self.at = self.caller.block(draw), calls, 0
        self.left -= 1
        start = self.at
        self.at += self.width
        if start == 0 and not self.left:
            return self.block
        return self.block.window(slice(start, start + self.width))


class TreeCaller:
    """Calls a tree verifier on draws of one scenario's run ``ctx``, drafting every tree with ``drafting`` and
    judging outputs under ``rule`` (the scheme's reference rule: the scheme's name)."""

    def __init__(self, ctx, verify, drafting: str, rule, *, degenerate=None):
        self.ctx, self.verify, self.drafting, self.rule = ctx, verify, drafting, rule
        self.scenario, self.backend = ctx.scenario, ctx.backend
        self.guard = Guard(ctx, verify, role="tree verifier", watched=INPUTS, degenerate=degenerate)
        self.pool = None if self.scenario.fixed_target_probs is not None else self.scenario.prompts()
        self.tables = self.scenario.law_tables(self.law_rows)  # once per scenario (None: dense rows)
        #: Residuals kept across blocks where they recur (keyed laws under the i.i.d. and top-k rules).
        self.keep_states = self.tables is not None and rule in ("iid", "topk")
        self.states = None

    @property
    def law_rows(self):
        return self.backend.law_rows if self.backend.casts_rows else None

    def draw(self, rows=None, calls: int = 1):
        return self.scenario.draw(self.ctx.rng, self.drafting, self.law_rows, rows=rows, calls=calls, pool=self.pool,
                                  tables=self.tables)

    def block(self, draw) -> TreeBlock:
        block = TreeBlock(draw, self.rule, states=self.states)
        if self.keep_states:
            self.states = block.states
        return block

    def pool_of(self, rows=None, *, windows: int) -> TreePool:
        return TreePool(self, rows, windows=windows)

    def inputs(self, draw) -> dict:
        """The verifier's keyword arguments (minus ``generator``) in the backend's form."""
        backend = self.backend
        kwargs = backend.verifier_inputs(draw.draft_token_ids, draw.draft_probs, draw.target_probs)
        parents = np.ascontiguousarray(draw.parents, dtype=np.int64)
        if backend.name == "numpy":
            parents = parents.view()
            parents.setflags(write=False)
        else:
            parents = backend.to_device(parents)
        return {"parents": parents, **kwargs}

    def call(self, block: TreeBlock, seed, check: str = "contract"):
        """Run the verifier on ``block``'s draw: ``(out, parsed)`` on the host, or ``(None, None)`` after a
        finding that stops the scenario."""
        return self.guard.call(self.inputs(block.draw), seed, check=check, draw=block.draw, parse=block.parse)

    def call_host(self, block: TreeBlock, seed, check: str = "contract"):
        return self.call(block, seed, check)[0]

    # -- what the shared checks ask of a kind ---------------------------------------------------------
    def non_finite_case(self) -> NonFiniteCase:
        """Row 0 gets an all-NaN root target row (always read)."""
        draw = self.draw()
        target = draw.target_probs.copy()
        target[0, 0, :] = np.nan
        bad = TreeDraw(draw.parents, draw.draft_token_ids, draw.draft_probs, target, draw.pool_index)
        return NonFiniteCase(bad, 0, "row", lambda tokens: (
            f"a row whose root target row is all NaN was silently turned into tokens {tokens}; raise an error or "
            "return -1 for such a row"), {"row": 0})

    def zero_coin_unsupported(self) -> str | None:
        return "needs a vocabulary of at least 2 tokens" if self.scenario.vocab_size < 2 else None

    def zero_coin_draw(self) -> TreeDraw:
        """Probe rows on the scenario's first tree shape: the root's target gives token 0 probability zero
        and the draft ranks tokens 0, 1, 2, ... first, so the root's first child (node 0) is token 0
        under every scheme; every other row is uniform, and every node's children are 0, 1, 2, ... (modulo V)."""
        scenario = self.scenario
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
        cast = self.law_rows if self.law_rows is not None else (lambda r: r)
        tile = (ZERO_COIN_ROWS, 1, 1)
        return TreeDraw(np.repeat(parents, ZERO_COIN_ROWS, axis=0), np.repeat(ids[None], ZERO_COIN_ROWS, axis=0),
                        np.tile(cast(draft[None]), tile), np.tile(cast(target[None]), tile),
                        np.zeros(ZERO_COIN_ROWS, dtype=np.int64))

    def zero_coin_problem(self, draw, out):
        """``(message, evidence)`` when ``out`` is malformed or emits a string of probability zero (exactly, at
        tolerance 0: the probe's rows are exact in every dtype) under the rule, else None."""
        block = self.block(draw)
        problem, parsed = block.parse(out)
        if problem is not None:
            return problem
        rule = self.ctx.options.rule
        bad, universal, _ = impossible_rows(block, out, parsed, tolerance=0.0, rule=rule)
        if not bad.any():
            return None
        row = int(np.flatnonzero(bad)[0])
        reason = describe_impossible(block, out, parsed, row, 0.0 if not universal[row] else 1.0)
        return (f"row {row} {reason}", {"row": row, "output": out[row].tolist(), "count": int(bad.sum()),
                                        "drafts": draw.draft_token_ids[row].tolist()})

    def replay_draw(self) -> TreeBlock:
        return self.block(self.draw())

    def rows_of(self, block) -> int:
        return block.batch

    def replay_difference(self, row, first, second) -> tuple:
        return ("two calls with the same generator state on the same trees gave different outputs: the verifier "
                "uses randomness other than its generator", {"row": row, "first": first, "second": second})
