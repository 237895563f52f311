"""The call protocol: drawing inputs, calling the sampler, watching its inputs, parsing its outputs.

A caller owns everything between a scenario and one call of the sampler: the scenario's law
tables and prompt pool, input draws (pooled for small calls), the backend's form of the
inputs, the sampler's exceptions, writes into its inputs, and the contract of its outputs.
Checks receive parsed steps and never call the sampler themselves except through a caller.
"""

from __future__ import annotations

import traceback
import weakref

import numpy as np

from ._contract import check_output

__all__ = ["CallPool", "CountingModel", "GeneratorCaller", "VerifierCaller"]

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

    def __init__(self, caller: "VerifierCaller", rows=None, *, windows: int):
        s = caller.scenario
        self.caller, self.rows = caller, rows
        self.width = s.rows_per_call if rows is None else max(1, min(int(rows), s.rows_per_call))
        cells = self.width * (2 * s.gamma + 1) * s.vocab_size
        self.most = int(max(1, min(POOL_CALLS, POOL_CELLS // cells)))
        self.remaining = max(1, int(windows))
        self.draw, self.left, self.at = None, 0, 0

    def next(self):
        """The next call's inputs."""
        return self.next_group(1)[1][0]

    def next_group(self, calls: int):
        """Up to ``calls`` consecutive calls' inputs from one pooled draw: ``(their rows as one draw,
        [each call's draw])``; fewer when the current pooled draw runs out first."""
        if not self.left:
            size = max(1, min(self.most, self.remaining))
            self.draw, self.left, self.at = self.caller.draw(rows=self.rows, calls=size), size, 0
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


def _dead():
    """A weak reference to nothing (the initial state of :attr:`VerifierCaller._reference`)."""
    return None


#: Traceback lines kept in a finding: the sampler's own frames and the exception, without the
#: checker's frames above them (a report stays readable and the failing line is shown).
TRACEBACK_LINES = 6


def _traceback(exc) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-TRACEBACK_LINES:])


class VerifierCaller:
    """Calls a verifier on draws of one scenario, for one :class:`ScenarioRun` (``run``).

    A call that raises, writes into its inputs or returns a malformed output becomes a finding
    and stops the scenario (``run.stopped``); such calls return ``None``.
    """

    def __init__(self, run, verify):
        self.run, self.verify = run, verify
        self.scenario, self.backend = run.scenario, run.backend
        self.pool = None if self.scenario.fixed_target_probs is not None else self.scenario.prompts()
        self.tables = self.scenario.law_tables(self.law_rows)
        #: gamma = 0 or V = 1: outside the contract's main domain, so a crash or malformed output there is a
        #: robustness warning (a failure under strict), while a wrong law there is still a failure.
        self.degenerate = self.scenario.gamma == 0 or self.scenario.vocab_size == 1
        self._device_tables = {}  # id(law table) -> its device copy, made once per run
        self._device_block = (None, None)  # (host block, its device copy): the current block only
        #: (weak reference to the draw the inputs share memory with, {input: fingerprint}): weak, so a draw
        #: the checker is done with (the NaN probe's, a finished block's) is freed at once, not kept here.
        self._reference = (_dead, None)

    @property
    def law_rows(self):
        return self.backend.law_rows if self.backend.casts_rows else None

    # -- inputs --------------------------------------------------------------------------------------
    def draw(self, rows=None, calls=1):
        """One draw of inputs (``calls`` calls' worth of rows; scenarios that draw one call at a time need not know)."""
        more = {"calls": calls} if calls > 1 else {}
        return self.scenario.draw(self.run.rng, self.law_rows, pool=self.pool, rows=rows, tables=self.tables, **more)

    def pool_of(self, rows=None, *, windows: int) -> CallPool:
        return CallPool(self, rows, windows=windows)

    # -- calls ---------------------------------------------------------------------------------------
    def call(self, draw, seed, check="contract"):
        """Run the verifier on ``draw``; its output on the host, or None after a finding that stops the scenario."""
        out = self.call_parsed(draw, seed, check)[0]
        return out if out is None or isinstance(out, np.ndarray) else self.backend.to_host(out)

    def _fingerprints(self, draw, kwargs) -> dict:
        """``{input: content fingerprint}`` before a call, computed once per draw: the inputs either share
        memory with it (numpy views) or are fresh copies of it made the same way every call (a device
        backend's tensors), so their content before the call is a function of the draw."""
        reference_draw, prints = self._reference
        if reference_draw() is not draw:
            prints = {k: self.backend.fingerprint(v) for k, v in kwargs.items()}
            self._reference = (weakref.ref(draw), prints)
        return prints

    def _mutated(self, kwargs, before: dict) -> list:
        return [k for k, v in kwargs.items() if self.backend.fingerprint(v) != before[k]]

    def release(self, block) -> None:
        """Forget ``block`` (its device copy and the fingerprints of its inputs) so its arrays are freed
        before the next block is drawn: at most one block of inputs is alive at a time. Returns None."""
        if block is not None:
            if self._device_block[0] is block:
                self._device_block = (None, None)
            if self._reference[0]() is block.draw:
                self._reference = (_dead, None)
        return None

    def unchanged(self, draw) -> bool:
        """Whether the inputs of ``draw`` still hold what they held before its calls (for draws whose calls
        skipped the per-call check, ``check_after=False``); a change is a contract failure."""
        reference_draw, before = self._reference
        if not self.backend.shares_inputs:
            return True  # fresh copies per call: each call's inputs were checked after it
        if not self.run.selected("contract") or reference_draw() is not draw:
            return True
        kwargs = {"draft_token_ids": draw.draft_token_ids, "draft_probs": draw.draft_probs,
                  "target_probs": draw.target_probs}
        changed = self._mutated(kwargs, before)
        if changed:
            self.run.fail("contract", f"the verifier modified its input(s) {changed} in place (their content changed "
                          "over the calls that shared these inputs)", {"modified": changed})
            self.run.stopped = True
        return not changed

    def call_parsed(self, draw, seed, check="contract", *, check_after: bool = True):
        """:meth:`call` and the decoded output: ``(out, step)``, or ``(None, None)``.

        The inputs' content is fingerprinted before the call and, when ``check_after``, after it: a
        write into them is a contract failure even when it went around numpy's read-only flag
        (``setflags(write=True)``, a C extension). A caller that reuses one draw for many calls may
        skip the check after each call and ask :meth:`unchanged` once at the end. The output is
        copied at once (a sampler may hand back the same buffer every call). An integer output left
        on a counting backend's device stays there when it is well formed (only then is it parsed
        there); anything else is brought to the host and checked there.
        """
        run, backend = self.run, self.backend
        kwargs = backend.verifier_inputs(draw.draft_token_ids, draw.draft_probs, draw.target_probs)
        watch = run.selected("contract")
        before = self._fingerprints(draw, kwargs) if watch else None
        run.calls += 1
        try:
            out = run.sampler_call(self.verify, **kwargs, generator=backend.generator(seed))
        except Exception as exc:  # the verifier's own error becomes a finding
            tb = _traceback(exc)
            if backend.read_only_inputs and ("read-only" in str(exc) or "WRITEABLE" in str(exc)):
                changed = self.modified_inputs(kwargs, seed)
                run.fail("contract", f"the verifier modified its input(s) {changed} in place ({type(exc).__name__} "
                         f"on the read-only inputs: {exc})", {"modified": changed, "traceback": tb})
            else:
                self._problem(check, f"the verifier raised {type(exc).__name__}: {exc}", {"traceback": tb})
            run.stopped = True
            return None, None
        if watch and (check_after or not backend.shares_inputs):
            changed = self._mutated(kwargs, before)
            if changed:
                run.fail("contract", f"the verifier modified its input(s) {changed} in place", {"modified": changed})
                run.stopped = True
                return None, None
        try:
            out = backend.copy(out)  # a static output buffer would otherwise change under the kept outputs
        except Exception:  # noqa: BLE001 - not an array at all: to_host below names the problem
            pass
        if backend.counts_on_device and backend.on_device(out):
            step = backend.parse_on_device(out, kwargs["draft_token_ids"], self.scenario.vocab_size)
            if step is not None:  # well formed: the output stays where the sampler left it
                return out, step
        try:
            out = backend.to_host(out)
        except Exception as exc:  # noqa: BLE001 - whatever the sampler returned, it is not an integer array
            self._problem("contract", f"the verifier's output could not be read as an integer array: {exc}")
            run.stopped = True
            return None, None
        # Shape, dtype and range are checked whatever the selection: parsing the output needs them.
        problem, step = check_output(out, draw.draft_token_ids, self.scenario.vocab_size)
        if problem is not None:
            self._problem("contract", problem[0], problem[1])
            run.stopped = True
            return None, None
        return out, step

    def _problem(self, check, message, evidence=None):
        """A crash or malformed output: a failure, or a robustness warning on a degenerate shape."""
        if self.degenerate:
            s = self.scenario
            self.run.warn(check, f"on a degenerate shape (gamma = {s.gamma}, V = {s.vocab_size}; robustness, not "
                          f"exactness): {message}", evidence)
        else:
            self.run.fail(check, message, evidence)

    def call_raw(self, draw, seed):
        """One call whose output the caller judges itself (probes of the verifier's robustness):
        the output on the host, or the exception the verifier raised."""
        kwargs = self.backend.verifier_inputs(draw.draft_token_ids, draw.draft_probs, draw.target_probs)
        self.run.calls += 1
        try:
            return self.backend.to_host(self.run.sampler_call(self.verify, **kwargs,
                                                              generator=self.backend.generator(seed)))
        except Exception as exc:  # noqa: BLE001 - the probe judges any exception
            return exc

    def modified_inputs(self, kwargs, seed) -> list:
        """Rerun on writable copies (same seed) to name the inputs the verifier writes into."""
        copies = {k: np.array(v, copy=True) for k, v in kwargs.items()}
        try:
            self.run.sampler_call(self.verify, **copies, generator=self.backend.generator(seed))
        except Exception:  # noqa: BLE001 - only the names of the modified inputs matter here
            pass
        return [k for k in kwargs if not np.array_equal(copies[k], kwargs[k], equal_nan=True)] or ["(unknown)"]

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


class CountingModel:
    """Wraps a causal model and counts its forward passes: every entry point that returns laws
    (``__call__``, ``last_probs``, ``start_probs``, ``probs_at``, ``cdf_at``) counts one, so a loop
    cannot hide target calls behind another method. Other attributes pass through."""

    #: The model's entry points that compute laws (each call is one forward pass).
    COUNTED = ("last_probs", "start_probs", "probs_at", "cdf_at")

    def __init__(self, model):
        self.model = model
        self.calls = 0
        self.vocab_size = model.vocab_size
        self.order = getattr(model, "order", None)

    def __call__(self, tokens):
        self.calls += 1
        return self.model(tokens)

    def __getattr__(self, name):
        attribute = getattr(self.model, name)
        if name not in self.COUNTED or not callable(attribute):
            return attribute

        def counted(*args, **kwargs):
            self.calls += 1
            return attribute(*args, **kwargs)

        return counted


class GeneratorCaller:
    """Calls a decode loop on prompts of one scenario, for one :class:`ScenarioRun` (``run``)."""

    def __init__(self, run, generate):
        self.run, self.generate = run, generate
        self.scenario, self.backend = run.scenario, run.backend

    def run_once(self, prompt_index, check="contract"):
        """Generate from the prompts ``prompt_index``: ``(output on the host or None, counting target)``."""
        run, s = self.run, self.scenario
        prompts = s.prompts[prompt_index]
        target, draft = self.backend.models(s.target, s.draft)
        target, draft = CountingModel(target), CountingModel(draft)
        given = self.backend.prompts(prompts.copy())
        snapshot = self.backend.copy(given)
        run.calls += 1
        try:
            out = run.sampler_call(self.generate, target=target, draft=draft, prompts=given,
                                   max_new_tokens=s.max_new_tokens, gamma=s.gamma,
                                   generator=self.backend.generator(int(run.rng.integers(2**63 - 1))))
            out = self.backend.to_host(out)
        except Exception as exc:
            run.fail(check, f"the decode loop raised {type(exc).__name__}: {exc}", {"traceback": _traceback(exc)})
            run.stopped = True
            return None, target
        expected_shape = (prompts.shape[0], s.max_new_tokens)
        problem = None
        if not isinstance(out, np.ndarray) or out.shape != expected_shape:
            problem = f"output shape {getattr(out, 'shape', None)} != [B, max_new_tokens] = {expected_shape}"
        elif not np.issubdtype(out.dtype, np.integer):
            problem = f"output dtype {out.dtype} is not an integer type"
        elif ((out < 0) | (out >= s.vocab_size)).any():
            row, col = (int(i) for i in np.argwhere((out < 0) | (out >= s.vocab_size))[0])
            problem = f"token {int(out[row, col])} at row {row}, position {col} is not in [0, {s.vocab_size})"
        elif not self.backend.same(snapshot, given):
            problem = "the decode loop modified its prompts in place"
        if problem:  # checked whatever the selection: the law tallies need well-formed output
            run.fail("contract", problem)
            run.stopped = True
            return None, target
        return out, target
