"""The chain verifier's caller: its inputs, pooled draws, and its outputs' contract (the call itself is guarded
by :class:`~specdec_check.checker.core.guard.Guard`, as for every kind).

A caller owns everything between a scenario and one call of the sampler: the scenario's law tables and
prompt pool, input draws (pooled for small calls), the backend's form of the inputs and the parse of the
outputs. Checks receive parsed steps and never call the sampler themselves except through a caller.
"""

from __future__ import annotations

import numpy as np

from ..checks.probes import NonFiniteCase
from ..core.guard import Guard
from .contract import STANDARD_ONLY_EVENTS, check_output, impossible_events

__all__ = ["CallPool", "VerifierCaller"]

#: Small calls are drawn together, up to this many probability cells per draw (2 MiB of float64:
#: drawing has a fixed cost per draw, contexts and one pass per position, that dominates calls of
#: a few rows; a few MiB keeps the pooled draw in cache)...
POOL_CELLS = 1 << 18
#: ... and at most this many calls per draw (a scenario of one-row calls draws 64 at once).
POOL_CALLS = 64


class CallPool:
    """Calls of ``rows`` rows cut from draws of several calls at once (views, no copies).

    Rows are drawn independently, so a window of a larger draw is distributed as a call of its
    own (:meth:`~specdec_check.scenarios.VerifierScenario.draw` with ``calls``). ``windows`` is
    the number of calls the caller may still ask for: no more are drawn.
    """

    def __init__(self, caller: "VerifierCaller", rows=None, *, windows: int, layout=None):
        s = caller.scenario
        self.caller, self.rows = caller, rows
        self.drawn = s.rows_per_call if rows is None else max(1, min(int(rows), s.rows_per_call))
        #: ``layout``: each call's rows are its drawn rows in this order (int indices, repeats allowed; a window
        #: then has ``len(layout)`` rows), gathered once by the draw (:meth:`VerifierScenario.draw`).
        self.layout = None if layout is None else np.asarray(layout, dtype=np.intp)
        self.width = self.drawn if layout is None else int(self.layout.size)
        # pooled by the rows drawn (a layout repeats rows after the draw): the same pooled draws, so the same rows
        cells = self.drawn * (2 * s.gamma + 1) * s.vocab_size
        self.most = int(max(1, min(POOL_CALLS, POOL_CELLS // cells)))
        self.remaining = max(1, int(windows))
        self.draw, self.left, self.at = None, 0, 0

    def _draw(self, calls: int):
        if self.layout is None:
            return self.caller.draw(rows=self.rows, calls=calls)
        layout = (np.arange(calls)[:, None] * self.drawn + self.layout[None, :]).reshape(-1)
        return self.caller.draw(rows=self.rows, calls=calls, layout=layout)

    def next(self):
        """The next call's inputs."""
        return self.next_group(1)[1][0]

    def next_group(self, calls: int):
        """Up to ``calls`` consecutive calls' inputs from one pooled draw: ``(their rows as one draw,
        [each call's draw])``; fewer when the current pooled draw runs out first."""
        if not self.left:
            size = max(1, min(self.most, self.remaining))
            self.draw, self.left, self.at = self._draw(size), size, 0
            self.remaining -= size
        take = max(1, min(int(calls), self.left))
        draw, start = self.draw, self.at
        self.left -= take
        self.at += take * self.width
        if not self.left:  # the pool is used up: only the caller's windows keep it alive now
            self.draw = None
        whole = draw if start == 0 and self.at == draw.draft_token_ids.shape[0] else draw.head(slice(start, self.at))
        if take == 1:
            return whole, [whole]
        return whole, [whole.head(slice(i * self.width, (i + 1) * self.width)) for i in range(take)]


#: The verifier's array inputs (their content must not change during a call).
INPUTS = ("draft_token_ids", "draft_probs", "target_probs")
#: Rows of the non-finite probe's call: a full-sized call, so a verifier that checks only some rows is seen.
PROBE_ROWS = 4096
#: Rows of the zero-coin probe's call (identical rows: one is enough, a few show a batch path too).
ZERO_COIN_ROWS = 8


class VerifierCaller:
    """Calls a verifier on draws of one scenario's run ``ctx`` (through its :class:`Guard`).

    A call that raises, writes into its inputs or returns a malformed output becomes a finding and
    stops the scenario; such calls return ``(None, None)``.
    """

    def __init__(self, ctx, verify, *, degenerate=None):
        self.ctx, self.verify = ctx, verify
        self.scenario, self.backend = ctx.scenario, ctx.backend
        self.guard = Guard(ctx, verify, role="verifier", watched=INPUTS, degenerate=degenerate)
        self.pool = None if self.scenario.fixed_target_probs is not None else self.scenario.prompts()
        self.tables = self.scenario.law_tables(self.law_rows)
        #: Whether each call's inputs are compared after it (False while a block serves several calls: the
        #: comparison is made once, when the block retires).
        self.check_after = True
        self._device_tables = {}  # id(law table) -> its device copy, made once per run
        self._device_block = (None, None)  # (host block, its device copy): the current block only

    @property
    def law_rows(self):
        return self.backend.law_rows if self.backend.casts_rows else None

    # -- inputs --------------------------------------------------------------------------------------
    def draw(self, rows=None, calls=1, layout=None):
        """One draw of inputs (``calls`` calls' worth of rows; scenarios that draw one call at a time need not know;
        ``layout``: :meth:`VerifierScenario.draw`'s)."""
        more = {"calls": calls} if calls > 1 else {}
        if layout is not None and not self._draws_in_layouts():  # a scenario class of its own, from before layouts
            return self.draw(rows, calls).head(np.asarray(layout, dtype=np.intp))
        if layout is not None:
            more["layout"] = layout
        return self.scenario.draw(self.ctx.rng, self.law_rows, pool=self.pool, rows=rows, tables=self.tables, **more)

    def _draws_in_layouts(self) -> bool:
        """Whether the scenario's ``draw`` takes ``layout`` (a user's subclass may override it without)."""
        found = getattr(self, "_layouts", None)
        if found is None:
            import inspect

            params = inspect.signature(self.scenario.draw).parameters.values()
            found = self._layouts = any(p.name == "layout" or p.kind is p.VAR_KEYWORD for p in params)
        return found

    def pool_of(self, rows=None, *, windows: int, layout=None) -> CallPool:
        return CallPool(self, rows, windows=windows, layout=layout)

    def inputs(self, draw) -> dict:
        return self.backend.verifier_inputs(draw.draft_token_ids, draw.draft_probs, draw.target_probs)

    # -- calls ---------------------------------------------------------------------------------------
    def call(self, draw, seed, check="contract"):
        """Run the verifier on ``draw``: ``(out, parsed step)`` (an integer output left on a counting backend's
        device stays there when it is well formed), or ``(None, None)`` after a finding that stops the scenario."""
        vocab, backend = self.scenario.vocab_size, self.backend
        kwargs = self.inputs(draw)

        def on_device(out):
            return backend.parse_on_device(out, kwargs["draft_token_ids"], vocab)

        return self.guard.call(kwargs, seed, check=check, draw=draw, check_after=self.check_after,
                               parse=lambda out: check_output(out, draw.draft_token_ids, vocab),
                               parse_on_device=on_device)

    def call_host(self, draw, seed, check="contract"):
        """:meth:`call`'s output on the host, or None after a finding that stops the scenario."""
        out = self.call(draw, seed, check)[0]
        return out if out is None or isinstance(out, np.ndarray) else self.backend.to_host(out)

    def release(self, block) -> None:
        """Forget ``block`` (its device copy and the fingerprints of its inputs) so its arrays are freed
        before the next block is drawn: at most one block of inputs is alive at a time. Returns None."""
        if block is not None:
            if self._device_block[0] is block:
                self._device_block = (None, None)
            self.guard.forget(block.draw)
        return None

    def unchanged(self, draw) -> bool:
        """Whether the inputs of ``draw`` still hold what they held before its calls (see :meth:`Guard.unchanged`)."""
        return self.guard.unchanged(draw, {name: getattr(draw, name) for name in INPUTS})

    # -- laws where the outputs are -----------------------------------------------------------------
    def device_block(self, block):
        """``block``'s laws on the backend's device, made once per block (the scenario's law tables
        once per run); only the current block's copy is kept."""
        host, copy = self._device_block
        if host is block:
            return copy
        tables = self.tables
        shared = {} if tables is None else {id(a): a for a in (tables.target, tables.draft, tables.target_below,
                                                                tables.final_below)}

        def to_tensor(array):
            if shared.get(id(array)) is array:
                if id(array) not in self._device_tables:
                    self._device_tables[id(array)] = self.backend.to_device(array)
                return self._device_tables[id(array)]
            return self.backend.to_device(array)

        copy = block.on_device(to_tensor)
        self._device_block = (block, copy)
        return copy

    # -- what the shared checks ask of a kind ---------------------------------------------------------
    def non_finite_case(self) -> NonFiniteCase:
        """Row 0 gets an all-NaN first target row (always read)."""
        draw = self.draw(rows=PROBE_ROWS)
        # A fresh draw of the probe's own (VerifierScenario.draw copies even fixed rows): its row is set to NaN
        # where it is, with no copy beside it (49 MB at V = 32,000, the default battery's peak).
        target = draw.target_probs
        target[0, 0, :] = np.nan
        bad = type(draw)(draw.draft_token_ids, draw.draft_probs, target, draw.pool_index)
        return NonFiniteCase(bad, 0, "row", lambda tokens: (
            f"a row whose first target row is all NaN was silently turned into tokens {tokens}; raise an error or "
            "return -1 for such a row"), {"row": 0})

    def zero_coin_unsupported(self) -> str | None:
        s = self.scenario
        if s.vocab_size < 2 or s.gamma < 1:
            return "needs a draft and a vocabulary of at least 2 tokens"
        return None

    def zero_coin_draw(self):
        """Rows whose first draft (token 0) has target probability zero: the target's first row is uniform on
        tokens 1..V-1, the draft ranks 0, 1, 2, ... first; every other row is uniform."""
        from ...scenarios import VerifierDraw

        s = self.scenario
        vocab, gamma = s.vocab_size, s.gamma
        draft = np.full((ZERO_COIN_ROWS, gamma, vocab), 1.0 / vocab)
        target = np.full((ZERO_COIN_ROWS, gamma + 1, vocab), 1.0 / vocab)
        target[:, 0] = np.r_[0.0, np.full(vocab - 1, 1.0 / (vocab - 1))]
        rank = 1.0 / np.arange(1, vocab + 1)
        draft[:, 0] = rank / rank.sum()
        cast = self.law_rows if self.law_rows is not None else (lambda r: r)
        ids = np.zeros((ZERO_COIN_ROWS, gamma), dtype=np.int64)
        return VerifierDraw(ids, cast(draft), cast(target), np.zeros(ZERO_COIN_ROWS, dtype=np.int64))

    def zero_coin_problem(self, draw, out):
        """``(message, evidence)`` when ``out`` is malformed or emits an event of probability zero, else None."""
        problem, step = check_output(out, draw.draft_token_ids, self.scenario.vocab_size)
        if problem is not None:
            return problem
        events = impossible_events(step, draw.draft_token_ids, draw.draft_probs, draw.target_probs, tolerance=0.0)
        if self.ctx.options.rule == "any":
            events = [(m, e) for m, e in events if e["event"] not in STANDARD_ONLY_EVENTS]
        return events[0] if events else None

    def replay_draw(self):
        from ..checks.randomness import RANDOMNESS_ROWS

        return self.draw(rows=RANDOMNESS_ROWS)

    def rows_of(self, draw) -> int:
        return int(len(draw.pool_index))

    def replay_difference(self, row, first, second) -> tuple:
        return ("two calls with the same generator state on the same inputs gave different outputs: the verifier "
                "uses randomness other than its generator", {"row": row, "first": first, "second": second})
