"""Supervised runs: the check in a child process, so that only a received verdict can pass.

A sampler can end the process that runs it (``sys.exit``, ``os._exit``, a signal, a
BaseException), hang in C code, or leave a non-daemon thread behind; none of that may turn into
exit status 0 or a passing test. The CLI (:func:`supervise_check`) and test runners
(:func:`run_isolated`) run the work in a child process; the parent enforces per-call time limits,
turns SIGINT / SIGTERM into partial reports and decides the exit status from what it received.
The parent never imports torch; the child is forked on Linux (spawned where CUDA is already
initialised in the parent, or where fork is unavailable).
"""

from ._check_run import DEFAULT_TIMEOUT_S, HEARTBEAT_ENV, heartbeat_period, repro_line, supervise_check
from ._isolated import IsolationError, SamplerCrashed, SamplerTimeout, run_isolated
from ._partial import assemble_report, crash_finding, interrupt_finding, timeout_finding, verdict_of
from ._process import START_METHOD_ENV, choose_start_method, describe_exception, describe_exit
from ._signals import SignalGuard, exit_status_for
from ._streams import TolerantStream, ensure_std_fds, safe_write, tolerant_stdio
from ._supervisor import Channel, ChannelMonitor, Outcome, RunState, supervise

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "HEARTBEAT_ENV",
    "START_METHOD_ENV",
    "Channel",
    "ChannelMonitor",
    "IsolationError",
    "Outcome",
    "RunState",
    "SamplerCrashed",
    "SamplerTimeout",
    "SignalGuard",
    "TolerantStream",
    "assemble_report",
    "choose_start_method",
    "crash_finding",
    "describe_exception",
    "describe_exit",
    "ensure_std_fds",
    "exit_status_for",
    "heartbeat_period",
    "interrupt_finding",
    "repro_line",
    "run_isolated",
    "safe_write",
    "supervise",
    "supervise_check",
    "timeout_finding",
    "tolerant_stdio",
    "verdict_of",
]
