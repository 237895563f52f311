"""Run work in a child process and watch it: per-call deadlines, heartbeats, stop requests, death.

The child reports in two ways (:class:`Channel`):

* a one-way pipe for the few messages that carry data (below);
* a shared-memory *call board* (four float64 slots) for the sampler calls themselves: when the
  call in progress started (0 between calls), its index, the calls done and the scenario index.
  Writing it costs no system call, so the sampler's thousands of calls are watched without
  waking the supervisor (one pipe message per call costs ~0.5 ms on a busy machine, where the
  woken reader preempts the writer: +15 % CPU on quick mode, measured).

The supervisor's loop wakes on a message, on the child's exit, at a deadline, at a heartbeat or
every :data:`POLL_S` seconds (to read the board and look for a stop request); whatever ends the
run, the child is killed and reaped before :func:`supervise` returns. The outcome says only what
happened; what it means (a report, an exit status, an exception) is the caller's business.

Messages (tuples, first item the tag):

========================================  ====================================================
``("run", header, scenario_names)``       the report's run metadata, the scenarios planned
``("scenario", index, findings, records,  a scenario ended: its part of the report (plain dicts)
summary)``
``("progress", done, total, label)``      the checker's progress callback
``("returned", value)``                   the work returned (last message)
``("raised", facts, exception)``          a BaseException escaped the work (last message)
========================================  ====================================================
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field

from ._process import Channel, child_entry, choose_start_method, describe_exit, kill_child

__all__ = ["Channel", "ChannelMonitor", "Outcome", "POLL_S", "RunState", "supervise"]

#: Longest sleep of the supervisor between looks at the call board and at a stop request, in seconds
#: (the resolution of a timeout; 10 wake-ups a second cost nothing measurable).
POLL_S = 0.1
#: Seconds a child that has sent its last message gets to exit before it is killed.
EXIT_GRACE_S = 5.0
#: Most messages read in a row before the deadlines are looked at again.
_BATCH = 1000
#: Call board slots: start time (time.monotonic, 0.0 between calls), call index, calls done, scenario index.
_STARTED, _INDEX, _DONE, _SCENARIO = range(4)


class ChannelMonitor:
    """The checker's ``monitor`` (see ``run_battery``) and ``progress`` callback, reported to the supervisor.

    Calls go to the call board only; the run's header, each scenario's part and progress go
    through the pipe.
    """

    def __init__(self, channel: Channel):
        self._send, self._board, self._scenario = channel.send, channel.board, 0

    def run_started(self, header: dict, scenario_names) -> None:
        from .._json import to_builtin
        from .._report_rules import REPORT_VERSION

        self._send(("run", {"report_version": REPORT_VERSION, **to_builtin(header)}, [str(n) for n in scenario_names]))

    def call_started(self, scenario: str, index: int) -> None:
        board = self._board
        board[_INDEX], board[_SCENARIO] = index, self._scenario
        board[_STARTED] = time.monotonic()  # last: a start time on the board means the slots above are set

    def call_finished(self, scenario: str, index: int) -> None:
        board = self._board
        board[_STARTED] = 0.0
        board[_DONE] += 1

    def scenario_finished(self, index: int, findings: list, records: list, summary) -> None:
        self._scenario = int(index) + 1
        self._send(("scenario", int(index), findings, records, summary))

    def progress(self, done, total, label="") -> None:
        self._send(("progress", done, total, str(label)))


@dataclass
class RunState:
    """What the supervisor knows of the run so far (read by heartbeats and by the caller)."""

    board: object = None
    started: float = field(default_factory=time.monotonic)
    header: dict | None = None
    scenario_names: list = field(default_factory=list)
    parts: list = field(default_factory=list)  # ("scenario", ...) messages' payloads, in order
    calls: int = 0  # sampler calls that returned (or raised an Exception)
    call: tuple | None = None  # (scenario, index, monotonic start) of the call in progress
    scenario: str | None = None  # the scenario last seen running
    progress: tuple | None = None  # the last (done, total, label)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def refresh(self) -> None:
        """Read the call board: the call in progress (if any) and the calls done."""
        if self.board is None:
            return
        started = self.board[_STARTED]
        index, scenario = int(self.board[_INDEX]), int(self.board[_SCENARIO])
        self.calls = int(self.board[_DONE])
        if started > 0.0:
            names = self.scenario_names
            name = names[scenario] if 0 <= scenario < len(names) else f"#{scenario}"
            self.call, self.scenario = (name, index, started), name
        else:
            self.call = None

    def absorb(self, message) -> None:
        tag = message[0]
        if tag == "run":
            self.header, self.scenario_names = message[1], list(message[2])
        elif tag == "scenario":
            self.parts.append({"index": message[1], "findings": message[2], "records": message[3],
                               "summary": message[4]})
        elif tag == "progress":
            self.progress = tuple(message[1:4])
            label = message[3]
            # A label names the scenario starting ("NAME", "NAME [shard 2/7]"), or a shard that finished on an
            # executor ("NAME ... done": not what is running now, shards run side by side).
            if label and message[1] < (message[2] or 0) and not label.endswith(" done"):
                self.scenario = label.split(" [shard ", 1)[0]


@dataclass(frozen=True)
class Outcome:
    """How a supervised run ended.

    ``status``: ``"returned"`` (``value`` is what the work returned), ``"raised"`` (a BaseException
    escaped the work: ``facts`` describes it, ``exception`` is the Exception itself when it could
    be sent), ``"died"`` (the child ended without a last message: ``how`` says how), ``"timeout"``
    (``call`` is the call that ran past ``call_timeout``, or None when ``total_timeout`` expired),
    ``"stopped"`` (``stop()`` returned ``signum``). ``call`` is ``(scenario, index, start)`` of the
    sampler call in progress when the run ended, or None.
    """

    status: str
    state: RunState
    value: object = None
    facts: dict | None = None
    exception: BaseException | None = None
    how: str = ""
    exitcode: int | None = None
    call: tuple | None = None
    signum: int | None = None


def _recv(conn):
    """The next message, or None when the channel is closed or broken (a message cut short)."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None
    except Exception:  # noqa: BLE001 - unpickling a garbled or half-written message
        return None


def _drain(conn, state) -> None:
    """Absorb the messages still in the pipe (sent before the child stopped)."""
    try:
        while conn.poll(0):
            message = _recv(conn)
            if message is None:
                return
            state.absorb(message)
    except (OSError, EOFError):
        return


def _finish(proc) -> None:
    """The child sent its last message: let it exit (os._exit follows at once), kill it if it does not."""
    proc.join(EXIT_GRACE_S)
    kill_child(proc)


def _died(proc, state) -> Outcome:
    """The channel closed without a last message: the child's exit status says what happened."""
    proc.join(EXIT_GRACE_S)
    exitcode = proc.exitcode
    if exitcode is None:
        kill_child(proc)
        how = "closed its channel to the supervisor without exiting (it was killed)"
    else:
        how = describe_exit(exitcode)
    state.refresh()
    return Outcome("died", state, how=how, exitcode=exitcode, call=state.call)


def _stopped(status, proc, receiver, state, **fields) -> Outcome:
    """Kill the child, keep what it had sent, and say why it was stopped."""
    kill_child(proc)
    _drain(receiver, state)
    state.refresh()
    return Outcome(status, state, **fields)


def supervise(work, *, call_timeout: float | None = None, total_timeout: float | None = None,
              heartbeat_s: float | None = None, on_message=None, on_heartbeat=None, stop=None,
              start_method: str | None = None) -> Outcome:
    """Run ``work(channel)`` (a :class:`Channel`) in a child process and watch it until it ends.

    ``call_timeout``: seconds one sampler call (from ``call_started`` to ``call_finished`` of a
    :class:`ChannelMonitor`) may take; ``total_timeout``: seconds the whole run may take (None or
    0: no limit). ``on_message(message, state)`` sees each message after it is absorbed into the
    state; ``on_heartbeat(state)`` is called every ``heartbeat_s`` seconds; ``stop()`` returning a
    signal number ends the run (``"stopped"``). With fork ``work`` may be any callable; with spawn
    it must be picklable. Returns the :class:`Outcome`.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    call_timeout = call_timeout if call_timeout and math.isfinite(call_timeout) else None
    total_timeout = total_timeout if total_timeout and math.isfinite(total_timeout) else None
    heartbeat_s = heartbeat_s if heartbeat_s and math.isfinite(heartbeat_s) else None
    context = multiprocessing.get_context(choose_start_method(start_method))
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice by a forked child
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    board = context.RawArray("d", 4)
    receiver, sender = context.Pipe(duplex=False)
    proc = context.Process(target=child_entry, args=(work, sender, board, os.getpid()), name="specdec-check-child")
    state = RunState(board=board)
    try:
        proc.start()
    finally:
        sender.close()  # the child holds the only write end: EOF when it is gone
    next_beat = state.started + heartbeat_s if heartbeat_s else None
    try:
        while True:
            for _ in range(_BATCH):  # everything sent so far, before any deadline is judged
                try:
                    pending = receiver.poll(0)
                except (OSError, EOFError):
                    pending = True  # _recv reports the broken channel
                if not pending:
                    break
                message = _recv(receiver)
                if message is None:  # closed: the child is gone or going; its exit says how
                    return _died(proc, state)
                if message[0] == "returned":
                    _finish(proc)
                    return Outcome("returned", state, value=message[1])
                if message[0] == "raised":
                    state.refresh()
                    _finish(proc)
                    return Outcome("raised", state, facts=message[1], exception=message[2], call=state.call)
                state.absorb(message)
                if on_message is not None:
                    on_message(message, state)
            state.refresh()
            now = time.monotonic()
            signum = stop() if stop is not None else None
            if signum:
                return _stopped("stopped", proc, receiver, state, signum=signum, call=state.call)
            call_deadline = state.call[2] + call_timeout if state.call and call_timeout else None
            total_deadline = state.started + total_timeout if total_timeout else None
            if total_deadline is not None and now >= total_deadline:
                return _stopped("timeout", proc, receiver, state, call=None)
            if call_deadline is not None and now >= call_deadline:
                call = state.call
                return _stopped("timeout", proc, receiver, state, call=call)
            if next_beat is not None and now >= next_beat:
                if on_heartbeat is not None:
                    on_heartbeat(state)
                next_beat = max(next_beat + heartbeat_s, time.monotonic())
                continue
            # A call that starts after this look ends no sooner than now + call_timeout.
            wake = [t - now for t in (call_deadline, total_deadline, next_beat) if t is not None]
            wake += [POLL_S if stop is not None else min(call_timeout or 1.0, 1.0)]
            ready = wait([receiver, proc.sentinel], max(0.0, min(wake)))
            if ready and receiver not in ready:  # exited, yet something it started holds the pipe open
                proc.join(EXIT_GRACE_S)
                state.refresh()
                return Outcome("died", state, how=describe_exit(proc.exitcode), exitcode=proc.exitcode,
                               call=state.call)
    finally:
        if proc.exitcode is None:
            kill_child(proc)
        receiver.close()
