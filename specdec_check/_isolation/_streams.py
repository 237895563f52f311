"""Standard streams that cannot change a verdict: closed descriptors, closed pipes, full disks.

The exit status of a check is its verdict, whatever becomes of stdout: ``| head -1`` (a pipe
closed early), ``> /dev/full`` or a closed descriptor 1 (``>&-``) must neither turn a failure
into 0 nor stop the report from being written. Two measures:

* :func:`ensure_std_fds` puts ``/dev/null`` on a closed descriptor 0, 1 or 2, so that no pipe
  or report file opened later lands on descriptor 1 (where a stray ``print`` would write into it).
* :class:`TolerantStream` wraps ``sys.stdout`` / ``sys.stderr``: the first write or flush that
  fails (EPIPE, ENOSPC, EBADF, ...) silences the stream for good, and points its descriptor at
  ``/dev/null`` so that the interpreter's final flush succeeds too (a failed final flush of
  stdout makes CPython exit with status 120).
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__ = ["TolerantStream", "ensure_std_fds", "safe_write", "tolerant_stdio"]


def ensure_std_fds() -> None:
    """Open ``/dev/null`` on each of the descriptors 0, 1 and 2 that is closed."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:  # pragma: no cover - no /dev/null: nothing better to do
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


class TolerantStream:
    """A text stream whose failures are swallowed: after the first one it writes nowhere.

    Every other attribute (``isatty``, ``encoding``, ``fileno``, ...) is the wrapped stream's.
    """

    def __init__(self, stream):
        self._stream = stream
        self.failed = None  # the OSError (or ValueError on a closed file) that silenced the stream

    def _silence(self, exc) -> None:
        self.failed = exc
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return
        try:  # pending buffered text then drains into /dev/null at exit instead of failing again
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
        except OSError:
            pass

    def write(self, text):
        if self.failed is None:
            try:
                return self._stream.write(text)
            except (OSError, ValueError) as exc:
                self._silence(exc)
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if self.failed is None:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._silence(exc)
                try:  # the descriptor is /dev/null now: the pending text goes there
                    self._stream.flush()
                except (OSError, ValueError):
                    pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def safe_write(stream, text: str) -> None:
    """Write and flush ``text`` to ``stream`` (may be None), ignoring every I/O error."""
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


@contextlib.contextmanager
def tolerant_stdio():
    """``sys.stdout`` and ``sys.stderr`` wrapped in :class:`TolerantStream` for the block (then restored,
    flushed through the wrapper so that a closed pipe cannot fail the interpreter's exit)."""
    ensure_std_fds()
    saved = sys.stdout, sys.stderr
    wrapped = [s if s is None or isinstance(s, TolerantStream) else TolerantStream(s) for s in saved]
    sys.stdout, sys.stderr = wrapped
    try:
        yield
    finally:
        for stream in wrapped:
            if stream is not None:
                stream.flush()
        if sys.stdout is wrapped[0]:
            sys.stdout = saved[0]
        if sys.stderr is wrapped[1]:
            sys.stderr = saved[1]
