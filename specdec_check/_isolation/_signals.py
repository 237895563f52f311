"""SIGINT and SIGTERM as requests: recorded while a supervised run is in progress, acted on by it.

Exit status after a signal follows the shell convention ``128 + signal number``: 130 for SIGINT,
143 for SIGTERM.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["SECOND_INTERRUPT_NOTICE", "SignalGuard", "exit_status_for"]

#: The signals a user sends to stop a run.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_status_for(signum: int) -> int:
    """``128 + signum`` (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by it."""
    return 128 + int(signum)


#: What the impatient user's second SIGINT is told: the partial report (written within a second or two of
#: the first) is finished first; a third SIGINT abandons it.
SECOND_INTERRUPT_NOTICE = (b"specdec-check: finishing the partial report first (a moment); interrupt once more "
                           b"to abandon it and write nothing\n")


class SignalGuard:
    """Context manager: SIGINT / SIGTERM set :attr:`signum` (the first one received) instead of
    ending the process; a second SIGINT is answered with :data:`SECOND_INTERRUPT_NOTICE` (the partial
    report is still written), a third raises KeyboardInterrupt (the impatient user's way out: then no
    report is written, and the CLI says so). Outside the main thread (where handlers cannot be
    installed) it records nothing. The guard is callable: ``guard()`` returns :attr:`signum` (the
    ``stop`` of ``supervise``).
    """

    def __init__(self):
        self.signum = None
        self.interrupts = 0
        self._saved = {}

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum
        if signum == signal.SIGINT:
            self.interrupts += 1
            if self.interrupts == 2:
                try:
                    os.write(2, SECOND_INTERRUPT_NOTICE)
                except OSError:  # pragma: no cover - stderr closed
                    pass
            elif self.interrupts > 2:
                raise KeyboardInterrupt

    def __call__(self):
        return self.signum

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                try:
                    self._saved[signum] = signal.signal(signum, self._handle)
                except (ValueError, OSError):  # pragma: no cover - e.g. an embedded interpreter
                    pass
        return self

    def __exit__(self, *exc_info):
        for signum, handler in self._saved.items():
            try:
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
            except (ValueError, OSError):  # pragma: no cover
                pass
        self._saved.clear()
        return False
