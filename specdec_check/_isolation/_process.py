"""The child process: how it is started (fork or spawn), set up, ended, killed and described.

The child runs ``work(channel)`` and ends with :func:`os._exit` right after sending what the work
returned (or the BaseException that escaped it), so no stray non-daemon thread, ``atexit``
hook or ``__del__`` of the code under test can keep it alive or change what was sent.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

from .._exception_place import exception_place

__all__ = ["Channel", "ChildSender", "START_METHOD_ENV", "child_entry", "choose_start_method", "describe_exit",
           "describe_exception", "kill_child"]

#: Environment variable forcing the start method of the child (``fork`` or ``spawn``), e.g. to test spawn.
START_METHOD_ENV = "SPECDEC_CHECK_START_METHOD"
#: Last lines of a traceback kept in a finding (the sampler's frames are at the end).
TRACEBACK_LINES = 12
#: Linux prctl option that sends the child a signal when its parent dies (PR_SET_PDEATHSIG).
_PR_SET_PDEATHSIG = 1


def _cuda_initialised() -> bool:
    """Whether this process has initialised CUDA (forking it then is unsafe); never imports torch."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a half-imported torch: assume the worst
        return True


def choose_start_method(requested: str | None = None) -> str:
    """``"fork"`` on Linux unless CUDA is initialised in this process; ``"spawn"`` otherwise.

    ``requested`` (or the :data:`START_METHOD_ENV` environment variable) forces one; fork is
    refused where the platform lacks it. macOS gets spawn: forking there is unsafe once
    system frameworks are loaded (the reason CPython made spawn its default on macOS).
    """
    import multiprocessing

    requested = requested or os.environ.get(START_METHOD_ENV) or None
    available = multiprocessing.get_all_start_methods()
    if requested is not None:
        if requested not in ("fork", "spawn") or requested not in available:
            raise ValueError(f"start method must be one of {[m for m in ('fork', 'spawn') if m in available]}; "
                             f"got {requested!r} (from {START_METHOD_ENV} or start_method=)")
        return requested
    if "fork" in available and sys.platform.startswith("linux") and not _cuda_initialised():
        return "fork"
    return "spawn"


def describe_exit(exitcode) -> str:
    """``"exited with status 0"`` or ``"was killed by signal SIGKILL (9)"`` for a Process.exitcode."""
    if exitcode is None:
        return "did not exit"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by signal {name} ({-exitcode})"
    return f"exited with status {exitcode}"


def describe_exception(exc: BaseException, lines: int | None = TRACEBACK_LINES) -> dict:
    """Plain facts about an exception: type, message, its traceback (the last ``lines`` lines; all
    with None), SystemExit's code, and the place in the user's code it came from (``place``)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    tail = text.splitlines() if lines is None else text[-4000:].splitlines()[-lines:]
    name = type(exc).__qualname__
    module = type(exc).__module__
    return {
        "type": name if module in ("builtins", "__main__") else f"{module}.{name}",
        "message": " ".join(str(exc).split()),
        "exit_code": exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, (int, str, type(None))) else None,
        "is_exception": isinstance(exc, Exception),
        "traceback": "\n".join(tail),
        "place": exception_place(exc),
    }


class Channel:
    """What the child's work gets: ``send(message)`` (the pipe) and ``board`` (the shared call board of
    :mod:`._supervisor`)."""

    def __init__(self, send, board):
        self.send, self.board = send, board


class ChildSender:
    """The child's end of the channel: ``send(message)``. A message that cannot be sent because the
    supervisor is gone ends the child (nobody is left to read a verdict); one sent from another
    process (the code under test forked and returned in both) ends that process."""

    def __init__(self, conn):
        self._conn, self._pid = conn, os.getpid()

    def __call__(self, message) -> None:
        if os.getpid() != self._pid:
            os._exit(1)
        try:
            self._conn.send(message)
        except (OSError, EOFError):
            os._exit(1)


def _detach(parent_pid: int) -> None:
    """Child set-up: its own process group (a terminal's Ctrl-C reaches the supervisor only, and a
    kill of the group reaches what the code under test started), SIGINT ignored at the Python level
    (the supervisor decides), SIGTERM back to its default (death), and on Linux death with the parent."""
    try:
        os.setpgid(0, 0)
    except (AttributeError, OSError):
        pass
    try:
        signal.signal(signal.SIGINT, lambda signum, frame: None)  # a Python handler: reset by exec
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the supervisor's handler, inherited by fork
    except (ValueError, OSError):
        pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except Exception:  # noqa: BLE001 - best effort: the closed channel also ends the child
            pass
        if os.getppid() != parent_pid:  # the parent died before prctl
            os._exit(1)


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001
            pass


def child_entry(work, conn, board, parent_pid: int) -> None:
    """Body of the child process: run ``work(channel)`` (a :class:`Channel` over ``conn``
    and the call ``board``), send ``("returned", value)`` or ``("raised", facts, exception-or-None)``,
    then end at once with :func:`os._exit`."""
    from ._streams import tolerant_stdio

    _detach(parent_pid)
    send = ChildSender(conn)
    status = 0
    with tolerant_stdio():
        try:
            message = ("returned", work(Channel(send, board)))
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, ... are the point
            message = ("raised", describe_exception(exc), exc if isinstance(exc, Exception) else None)
        try:
            send(message)
        except Exception as exc:  # noqa: BLE001 - the value or exception cannot be pickled
            facts = describe_exception(exc)
            facts.update(message=f"the result could not be sent back: {facts['message']}", unsendable=True)
            try:
                send(("raised", facts, None))
            except Exception:  # noqa: BLE001
                status = 1
        _flush_stdio()
    try:
        conn.close()
    except OSError:
        pass
    os._exit(status)


def kill_child(proc, grace_s: float = 5.0) -> None:
    """SIGKILL the child's process group (the child and what it started) and the child; reap it."""
    if proc.exitcode is None:
        try:
            if hasattr(os, "killpg") and os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
        try:
            proc.kill()
        except (OSError, AttributeError, ValueError):
            pass
    proc.join(grace_s)
    if proc.exitcode is None:  # unkillable for now (uninterruptible sleep in a driver): do not let
        import multiprocessing.process  # multiprocessing's exit hook wait for it when we exit

        getattr(multiprocessing.process, "_children", set()).discard(proc)
