"""The call protocol of a tree verifier: drawing trees, calling, watching inputs, parsing outputs.

As :class:`~specdec_check.checker._caller.VerifierCaller` for chains: a call that raises, writes
into its inputs or returns a malformed output becomes a finding and stops the scenario. Outputs
are always brought to the host (tree laws are gathered there).
"""

from __future__ import annotations

import traceback

import numpy as np

from ._tree_block import TreeBlock

__all__ = ["TreeCaller", "TreePool"]

#: Traceback lines kept in a finding (the sampler's frames and the exception).
TRACEBACK_LINES = 6
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


def _traceback(exc) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-TRACEBACK_LINES:])


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
    """Calls a tree verifier on draws of one scenario for one :class:`ScenarioRun` (``run``), drafting
    every tree with ``drafting`` and judging outputs under ``rule``."""

    def __init__(self, run, verify, drafting: str, rule):
        self.run, self.verify, self.drafting, self.rule = run, verify, drafting, rule
        self.scenario, self.backend = run.scenario, run.backend
        self.pool = None if self.scenario.fixed_target_probs is not None else self.scenario.prompts()
        self.tables = self.scenario.law_tables(self.law_rows)  # once per scenario (None: dense rows)
        #: Residuals kept across blocks where they recur (keyed laws under the i.i.d. and top-k rules).
        self.keep_states = self.tables is not None and rule in ("iid", "topk")
        self.states = None

    @property
    def law_rows(self):
        return self.backend.law_rows if self.backend.casts_rows else None

    def draw(self, rows=None, calls: int = 1):
        return self.scenario.draw(self.run.rng, self.drafting, self.law_rows, rows=rows, calls=calls, pool=self.pool,
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

    def call(self, block: TreeBlock, seed: int, check: str = "contract"):
        """Run the verifier on ``block``'s draw: ``(out, parsed)`` on the host, or ``(None, None)`` after a
        finding that stops the scenario."""
        run, backend = self.run, self.backend
        kwargs = self.inputs(block.draw)
        watch = run.selected("contract") and not backend.read_only_inputs
        originals = {k: backend.copy(v) for k, v in kwargs.items()} if watch else None
        run.calls += 1
        try:
            out = self.verify(**kwargs, generator=backend.generator(seed))
        except Exception as exc:  # the verifier's own error becomes a finding
            tb = _traceback(exc)
            if backend.read_only_inputs and "read-only" in str(exc):
                changed = self.modified_inputs(kwargs, seed)
                run.fail("contract", f"the tree verifier modified its input(s) {changed} in place "
                         f"({type(exc).__name__} on the read-only inputs: {exc})",
                         {"modified": changed, "traceback": tb})
            else:
                run.fail(check, f"the tree verifier raised {type(exc).__name__}: {exc}", {"traceback": tb})
            run.stopped = True
            return None, None
        if originals is not None:
            changed = [k for k in kwargs if not backend.same(kwargs[k], originals[k])]
            if changed:
                run.fail("contract", f"the tree verifier modified its input(s) {changed} in place",
                         {"modified": changed})
                run.stopped = True
                return None, None
        try:
            out = backend.to_host(out)
        except Exception as exc:  # noqa: BLE001 - whatever was returned, it is not an integer array
            run.fail("contract", f"the tree verifier's output could not be read as an integer array: {exc}")
            run.stopped = True
            return None, None
        problem, parsed = block.parse(out)
        if problem is not None:
            run.fail("contract", problem[0], problem[1])
            run.stopped = True
            return None, None
        return out, parsed

    def call_raw(self, draw, seed: int, generator=None):
        """One call judged by the caller itself (probes): the host output, or the exception raised."""
        kwargs = self.inputs(draw)
        self.run.calls += 1
        try:
            gen = self.backend.generator(seed) if generator is None else generator
            return self.backend.to_host(self.verify(**kwargs, generator=gen))
        except Exception as exc:  # noqa: BLE001 - the probe judges any exception
            return exc

    def modified_inputs(self, kwargs, seed) -> list:
        """Rerun on writable copies (same seed) to name the inputs the verifier writes into."""
        copies = {k: np.array(v, copy=True) for k, v in kwargs.items()}
        try:
            self.verify(**copies, generator=self.backend.generator(seed))
        except Exception:  # noqa: BLE001 - only the names of the modified inputs matter here
            pass
        return [k for k in kwargs if not np.array_equal(copies[k], kwargs[k], equal_nan=True)] or ["(unknown)"]
