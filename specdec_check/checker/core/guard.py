"""The one guarded call every kind's caller uses: the sampler's exceptions, writes into its inputs,
copies and host transfer of its output, and the contract of what it returned.

A kind's caller only builds the inputs (in the backend's form) and parses outputs; :class:`Guard`
does the rest the same way for every kind:

- an exception becomes a finding with the last frames of its traceback (on a degenerate shape, a
  robustness finding: :mod:`~specdec_check.checker.core.policy`); a "read-only" error on read-only
  inputs is a write into the inputs, named by a rerun on writable copies;
- the inputs' content is fingerprinted before the call (once per draw: inputs are views of the draw,
  or fresh copies made the same way every call) and compared after it, so a write that went around
  numpy's read-only flag (``setflags(write=True)``, a C extension) is seen too; a caller that hands one
  draw to many calls may compare once, when the draw retires (:meth:`Guard.unchanged`);
- the output is copied at once (a sampler may hand back the same buffer every call), left on the
  device where the kind can parse it there, else brought to the host and parsed by the kind.
"""

from __future__ import annotations

import traceback
import weakref

import numpy as np

from ..._exception_place import exception_summary

__all__ = ["Guard", "TRACEBACK_LINES", "format_traceback"]

#: The calls whose inputs are fingerprinted before and after (content compared): every call of the first
#: WATCH_ALL of a scenario, then one in WATCH_EVERY. A sampler that writes into its inputs does it on its first
#: calls; one whose write depends on the data is seen on one call in WATCH_EVERY of those where it writes; and
#: numpy inputs are read-only besides (a write raises at once, on every call). Hashing every input of every
#: call cost 18% of a token-sampler run and 12% of the chain battery's CPU (issue 31).
#: (A later shard of a split scenario runs calls after the first shard's: it watches one in WATCH_EVERY only.)
WATCH_ALL = 64
WATCH_EVERY = 8
#: ... and the first WATCH_ALL calls are all watched only while they hand over less than this many bytes in all:
#: past it (calls of 1e6 rows: 48 MB of inputs each) one in WATCH_EVERY, so that hashing stays a small share.
WATCH_BYTES = 256 << 20
#: Traceback lines kept in a finding: the sampler's own frames and the exception, without the
#: checker's frames above them (a report stays readable and the failing line is shown).
TRACEBACK_LINES = 6


def format_traceback(exc) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-TRACEBACK_LINES:])


def _dead():
    """A weak reference to nothing (the initial state of :attr:`Guard._reference`)."""
    return None


def _read_only_error(exc) -> bool:
    return "read-only" in str(exc) or "WRITEABLE" in str(exc)


class Guard:
    """Calls ``sampler`` for one scenario's run ``ctx`` (see the module docstring).

    ``role`` names the sampler in findings ("verifier", "tree verifier", "decode loop"); ``watched``
    the inputs whose content must not change; ``degenerate``: None, or the shape of a scenario outside
    the contract's main domain ("gamma = 0, V = 8"), where a crash or malformed output is robustness.
    """

    def __init__(self, ctx, sampler, *, role: str, watched: tuple, degenerate: str | None = None, explain=None):
        self.ctx, self.sampler, self.role, self.watched = ctx, sampler, role, tuple(watched)
        self.backend, self.degenerate = ctx.backend, degenerate
        #: ``explain(kwargs) -> str``: what the inputs of a call that raised had that the contract allows but
        #: a sampler may not expect (a kind's conventions: padding, empty rows), added to the finding.
        self.explain = explain
        #: (weak reference to the draw the inputs come from, {input: fingerprint}): weak, so a draw the
        #: checker is done with (a probe's, a finished block's) is freed at once, not kept here.
        self._reference = (_dead, None)
        self.calls = 0  # calls made through this guard (which ones are watched: WATCH_ALL, WATCH_EVERY)
        self.watched_bytes = 0  # input bytes of the watched calls (WATCH_BYTES)

    # -- the call ------------------------------------------------------------------------------------
    def call(self, kwargs: dict, seed, *, parse, check: str = "contract", draw=None, check_after: bool = True,
             parse_on_device=None, raw_output: bool = False):
        """``sampler(**kwargs, generator=...)`` guarded: ``(out, parsed)``, or ``(None, None)`` after a finding
        that stops the scenario. ``seed`` is an int (a fresh generator of the backend) or a generator;
        ``parse(out) -> (problem, parsed)`` the kind's contract on the host output (``problem`` None or
        ``(message, evidence)``); ``parse_on_device(out) -> parsed | None`` where the kind parses on a device;
        ``draw`` the object the inputs are views or copies of (their fingerprints are computed once per draw);
        ``raw_output``: ``parse`` gets the output as returned (a tuple of arrays: it copies and moves them itself)."""
        ctx, backend = self.ctx, self.backend
        self.calls += 1
        # a scenario's first calls are in its first shard: a later shard watches one call in WATCH_EVERY only
        early = self.calls <= WATCH_ALL and self.watched_bytes < WATCH_BYTES and not getattr(ctx, "part", 0)
        watch = ctx.selected("contract") and (early or self.calls % WATCH_EVERY == 0)
        before = self._fingerprints(draw, kwargs) if watch else None
        if before is not None:
            self.watched_bytes += sum(int(getattr(kwargs[k], "nbytes", 0) or 0) for k in before)
        generator = backend.generator(seed) if isinstance(seed, (int, np.integer)) else seed
        ctx.calls += 1
        try:
            out = ctx.sampler_call(self.sampler, **kwargs, generator=generator)
        except Exception as exc:  # the sampler's own error becomes a finding
            self._raised(exc, kwargs, seed, check)
            return None, None
        if watch and before is not None and (check_after or not backend.shares_inputs):
            changed = self._mutated(kwargs, before)
            if changed:
                self._modified(changed)
                return None, None
        if raw_output:
            problem, parsed = parse(out)
            if problem is not None:
                self.problem("contract", problem[0], problem[1])
                return None, None
            return out, parsed
        try:
            out = backend.copy(out)  # a static output buffer would otherwise change under the kept outputs
        except Exception:  # noqa: BLE001 - not an array at all: to_host below names the problem
            pass
        if parse_on_device is not None and backend.counts_on_device and backend.on_device(out):
            parsed = parse_on_device(out)
            if parsed is not None:  # well formed: the output stays where the sampler left it
                return out, parsed
        try:
            out = backend.to_host(out)
        except Exception as exc:  # noqa: BLE001 - whatever the sampler returned, it is not an integer array
            self.problem("contract", f"the {self.role}'s output could not be read as an integer array: {exc}")
            return None, None
        problem, parsed = parse(out)  # checked whatever the selection: the checks need well-formed outputs
        if problem is not None:
            self.problem("contract", problem[0], problem[1])
            return None, None
        return out, parsed

    def raw(self, kwargs: dict, seed):
        """One call whose output the caller judges itself (probes): the host output, or the exception raised."""
        generator = self.backend.generator(seed) if isinstance(seed, (int, np.integer)) else seed
        self.ctx.calls += 1
        try:
            return self.backend.to_host(self.ctx.sampler_call(self.sampler, **kwargs, generator=generator))
        except Exception as exc:  # noqa: BLE001 - the probe judges any exception
            if getattr(exc, "breaks_the_sampler", False):  # a program that died or broke the protocol: never an
                self._raised(exc, kwargs, seed, "contract")  # answer a probe may accept, always a finding
            # Without tracebacks (its own and those of the exceptions it chains): the frames reach back (f_back) to
            # the probe's own frame, which holds the exception, a cycle that kept the probe's inputs (129 MB at
            # V = 32,000) until a full collection.
            seen, chain = set(), [exc]
            while chain:
                link = chain.pop()
                if link is not None and id(link) not in seen:
                    seen.add(id(link))
                    link.__traceback__ = None
                    chain += [link.__context__, link.__cause__]
            return exc

    # -- findings ------------------------------------------------------------------------------------
    def problem(self, check: str, message: str, evidence=None) -> None:
        """A crash or malformed output, which stops the scenario: a failure, or a robustness finding on a
        degenerate shape (robustness, not exactness: a wrong law there is still a failure)."""
        recorder = self.ctx.recorder
        if self.degenerate:
            recorder.robustness(check, f"on a degenerate shape ({self.degenerate}; robustness, not exactness): "
                                f"{message}", evidence)
        else:
            recorder.failure(check, message, evidence)
        recorder.stop()

    def _raised(self, exc, kwargs, seed, check) -> None:
        tb = format_traceback(exc)
        if self.backend.read_only_inputs and _read_only_error(exc):
            changed = self.modified_inputs(kwargs, seed)
            self.ctx.recorder.failure("contract", f"the {self.role} modified its input(s) {changed} in place "
                                      f"({type(exc).__name__} on the read-only inputs: {exc})",
                                      {"modified": changed, "traceback": tb}, stop=True)
        else:
            note = self.explain(kwargs) if self.explain is not None else ""
            self.problem(check, f"the {self.role} raised {exception_summary(exc)}{note}", {"traceback": tb})

    def _modified(self, changed, how: str = "") -> None:
        self.ctx.recorder.failure("contract", f"the {self.role} modified its input(s) {changed} in place{how}",
                                  {"modified": changed}, stop=True)

    # -- the inputs ----------------------------------------------------------------------------------
    def _fingerprints(self, draw, kwargs) -> dict:
        """``{input: content fingerprint}`` before a call, computed once per ``draw`` (every call when None)."""
        reference_draw, prints = self._reference
        if draw is None or reference_draw() is not draw:
            prints = {k: self.backend.fingerprint(kwargs[k]) for k in self.watched if kwargs.get(k) is not None}
            if draw is not None:
                self._reference = (weakref.ref(draw), prints)
        return prints

    def _mutated(self, kwargs, before: dict) -> list:
        return [k for k, v in before.items() if self.backend.fingerprint(kwargs[k]) != v]

    def unchanged(self, draw, kwargs) -> bool:
        """Whether the inputs of ``draw`` (as ``kwargs``) still hold what they held before its calls (for draws
        whose calls skipped the per-call check, ``check_after=False``); a change is a contract failure."""
        reference_draw, before = self._reference
        if not self.backend.shares_inputs:
            return True  # fresh copies per call: each call's inputs were checked after it
        if not self.ctx.selected("contract") or reference_draw() is not draw:
            return True
        changed = self._mutated(kwargs, before)
        if changed:
            self._modified(changed, " (their content changed over the calls that shared these inputs)")
        return not changed

    def forget(self, draw) -> None:
        """Drop the fingerprints of ``draw`` (its arrays can then be freed)."""
        if self._reference[0]() is draw:
            self._reference = (_dead, None)

    def modified_inputs(self, kwargs, seed) -> list:
        """Rerun on writable copies (same seed) to name the inputs the sampler writes into."""
        copies = {k: np.array(v, copy=True) if k in self.watched and v is not None else v for k, v in kwargs.items()}
        generator = self.backend.generator(seed) if isinstance(seed, (int, np.integer)) else seed
        try:
            self.ctx.sampler_call(self.sampler, **copies, generator=generator)
        except Exception:  # noqa: BLE001 - only the names of the modified inputs matter here
            pass
        return [k for k in self.watched if kwargs.get(k) is not None
                and not np.array_equal(copies[k], kwargs[k], equal_nan=True)] or ["(unknown)"]
