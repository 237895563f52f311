"""The CLI's check run, supervised: the verdict comes from a child process or not at all.

:func:`supervise_check` runs the check (``work``, built by the CLI) in a child process and turns
whatever happens into a report and an exit status:

======================================  ==========================  ==================
what happened                           report                      exit status
======================================  ==========================  ==================
the check finished                      the check's report          0 passed / inefficient, 1 failed, 4 inconclusive
a sampler call ran past ``--timeout``   partial, ``timeout`` failure  1
the process exited / was killed /       partial, ``crash`` failure    1
a BaseException escaped (sys.exit,
KeyboardInterrupt raised by the code)
SIGINT / SIGTERM to the CLI             partial, verdict            130 / 143
                                        ``interrupted``
usage error found in the child          none                        2 (the CLI's UsageError)
error of specdec-check itself           none                        3
======================================  ==========================  ==================

The report files are written before anything is printed (``publish``), and nothing printed can
change the exit status. Progress: the tqdm bar on a terminal; otherwise a heartbeat line on
stderr every :data:`HEARTBEAT_S` seconds (``SPECDEC_CHECK_HEARTBEAT_S``; 0 turns it off).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from ._partial import assemble_report, crash_finding, interrupt_finding, timeout_finding
from .._command_line import command_line
from .._report_rules import VERDICT_EXIT_STATUS
from .._settings import DEFAULT_TIMEOUT_S
from ._signals import SignalGuard, exit_status_for
from ._streams import safe_write
from ._supervisor import supervise

__all__ = ["DEFAULT_TIMEOUT_S", "HEARTBEAT_ENV", "HEARTBEAT_S", "heartbeat_period", "repro_line", "supervise_check"]

#: Seconds between heartbeat lines when stderr is not a terminal (the issue's bound: at least every 30 s).
HEARTBEAT_S = 30.0
#: Environment variable overriding :data:`HEARTBEAT_S` (seconds; 0 turns the heartbeat off).
HEARTBEAT_ENV = "SPECDEC_CHECK_HEARTBEAT_S"
#: Seconds between refreshes of the terminal progress bar's label (calls done) during a scenario.
_BAR_REFRESH_S = 1.0
EXIT_PASSED, EXIT_FAILED, EXIT_INTERNAL = 0, 1, 3


def heartbeat_period(environ=None) -> float:
    """The heartbeat period in seconds from ``SPECDEC_CHECK_HEARTBEAT_S`` (default 30; 0: none).

    Raises ValueError on anything but a finite number >= 0.
    """
    text = (os.environ if environ is None else environ).get(HEARTBEAT_ENV)
    if text is None or not text.strip():
        return HEARTBEAT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0.0 or value == float("inf"):
        raise ValueError(f"{HEARTBEAT_ENV} must be a number of seconds >= 0 (0 turns the heartbeat off); "
                         f"got {text!r}")
    return value


def repro_line(command: str, path: str, options: dict, scenario: str | None = None) -> str:
    """A shell-quoted command that reruns the check (one scenario when ``scenario`` is given)."""
    return command_line(command, path, mode=options.get("mode"), tv=options.get("tv"), seed=options.get("seed"),
                        scenarios=options.get("scenarios"), scenario=scenario, alpha=options.get("alpha"),
                        checks=options.get("checks"), strict=bool(options.get("strict")),
                        rule=options.get("rule") or "standard", backend=options.get("backend") or "numpy",
                        device=options.get("device"), dtype=options.get("dtype"), timeout=options.get("timeout"))


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _where(state) -> str:
    """``scenario 'x' (2 of 5), 37 sampler calls done`` from what the supervisor knows."""
    if state.header is None:
        return "importing the sampler and preparing the run"
    names = state.scenario_names
    name = state.call[0] if state.call else state.scenario
    if name is None and not state.calls:  # the header comes before the plans; shards on workers report no calls
        if state.progress is not None:
            done, total, _ = state.progress
            return f"{done} of {total} shard(s) finished in worker processes (their sampler calls are counted there)"
        return ("planning the scenarios' sample sizes and shards, or running the first shards in worker processes "
                "(no sampler call reported yet)")
    position = ""
    if name is not None and names:
        position = f" ({min(len(state.parts) + 1, len(names))} of {len(names)})"
    text = f"scenario {name!r}{position}" if name is not None else "starting the first scenario"
    return f"{text}, {state.calls:,} sampler call(s) done"


def _running(state) -> float:
    """Seconds the call in progress has run, when that is worth saying (1 s or more), else 0."""
    if state.call is None:
        return 0.0
    running = time.monotonic() - state.call[2]
    return running if running >= 1.0 else 0.0


class _Watch:
    """The parent's view while the child runs: progress bar or heartbeat lines."""

    def __init__(self, command, progress, heartbeat_s):
        self.command, self.progress = command, progress
        self.heartbeat_s = _BAR_REFRESH_S if progress is not None else heartbeat_s

    def message(self, message, state) -> None:
        if message[0] == "progress" and self.progress is not None:
            self.progress(*message[1:4])

    def beat(self, state) -> None:
        running = _running(state)
        if self.progress is not None:
            if state.progress is not None:
                done, total, label = state.progress
                label = f"{label} ({state.calls:,} calls)" if state.calls else label
                if running:
                    label += f"; call {state.call[1]} running for {_clock(running)}"
                self.progress(done, total, label)
            return
        line = f"specdec-check {self.command}: still running after {_clock(state.elapsed)}: {_where(state)}"
        if running:
            line += f"; call {state.call[1]} has run for {_clock(running)}"
        safe_write(sys.stderr, line + "\n")

    def close(self) -> None:
        if self.progress is not None:
            try:
                self.progress.close()
            except Exception:  # noqa: BLE001 - a broken terminal must not change the verdict
                pass
            self.progress = None


def _with_version(header: dict) -> dict:
    from .._report_rules import REPORT_VERSION

    return {"report_version": REPORT_VERSION, **header}


def _how_raised(facts: dict) -> str:
    """``raised SystemExit (sys.exit(0))``, ``raised KeyboardInterrupt (no message)``, ``raised pkg.Boom: message
    [at file.py:3 in f: raise Boom("message")]`` (the user's frame, where the facts have one)."""
    kind = facts.get("type", "BaseException")
    if kind == "SystemExit":
        return f"raised SystemExit (sys.exit({facts.get('exit_code')!r}))"
    detail = facts.get("message")
    place = f" [{facts['place']}]" if facts.get("place") else ""
    return (f"raised {kind}: {detail}" if detail else f"raised {kind} (no message)") + place


def supervise_check(work, *, command: str, path: str, options: dict, fallback_header: dict, publish,
                    usage_error=ValueError, progress=None, call_timeout: float | None = DEFAULT_TIMEOUT_S,
                    heartbeat_s: float | None = None, start_method: str | None = None) -> int:
    """Run ``work(channel)`` (the check, in a child process) and return the CLI's exit status.

    ``work`` returns ``("report", data)``, ``("usage", message)``, ``("sampler", facts)`` (the sampler's
    Exception escaped the checker) or ``("internal", facts)``. ``publish(data)`` writes the report files
    and then prints; it is called for every outcome that has a report, with SIGINT / SIGTERM held off
    until it returns. ``fallback_header`` stands in for the run's header when the child never sent one
    (it ended while importing the sampler). ``usage_error`` is the exception class raised for a usage
    error; ``options`` (mode, seed, ...) make the repro line of a timeout or crash.
    """
    if heartbeat_s is None:
        try:
            heartbeat_s = heartbeat_period()
        except ValueError as exc:
            raise usage_error(str(exc)) from None
    watch = _Watch(command, progress, heartbeat_s)
    with SignalGuard() as guard:
        try:
            outcome = supervise(work, call_timeout=call_timeout, heartbeat_s=watch.heartbeat_s,
                                on_message=watch.message, on_heartbeat=watch.beat, stop=guard,
                                start_method=start_method)
        finally:
            watch.close()
        state = outcome.state
        if outcome.status == "returned":
            tag, payload = outcome.value
            if tag == "report":
                publish(payload)
                status = VERDICT_EXIT_STATUS.get(payload.get("verdict"), EXIT_FAILED)
                return exit_status_for(guard.signum) if guard.signum else status
            if tag == "usage":
                raise usage_error(payload)
            if tag == "internal":
                safe_write(sys.stderr, f"{payload.get('traceback', '')}\nspecdec-check: internal error: "
                                       f"{payload.get('type')}: {payload.get('message')}\n")
                return EXIT_INTERNAL
            how, facts = _how_raised(payload), payload  # "sampler": its Exception escaped the checker
        elif outcome.status == "raised":
            how, facts = _how_raised(outcome.facts or {}), outcome.facts
        else:
            how, facts = outcome.how, None
        header = state.header or _with_version(fallback_header)
        planned, completed = state.scenario_names, len(state.parts)
        scenario = outcome.call[0] if outcome.call else state.scenario
        repro = repro_line(command, path, options, scenario)
        verdict, status = None, EXIT_FAILED
        if outcome.status == "timeout":
            finding = timeout_finding(timeout_s=call_timeout, call=outcome.call, completed=completed, planned=planned,
                                      repro=repro)
        elif outcome.status == "stopped":
            name = signal.Signals(outcome.signum).name
            finding = interrupt_finding(signal_name=name, call=outcome.call, scenario=state.scenario,
                                        completed=completed, planned=planned)
            verdict, status = "interrupted", exit_status_for(outcome.signum)
        else:
            finding = crash_finding(how=how, call=outcome.call, scenario=state.scenario, completed=completed,
                                    planned=planned, facts=facts, repro=repro)
        data = assemble_report(header, state.parts, [finding], elapsed_s=state.elapsed, verdict=verdict)
        try:
            publish(data)  # the report first, then any words
        finally:
            safe_write(sys.stderr, f"specdec-check {command}: {finding['check']}: {finding['message']}\n")
        return status
