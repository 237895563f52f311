"""How an exception raised by the code under test is named in a finding: its type, its message (or "no
message"), and the innermost frame of the user's own code (file:line, function, source line).

The user's frame is the innermost one outside this package and outside the libraries a sampler calls into
(numpy, torch, the standard library): where the user's code raised or called what raised. Without one
(an exception raised inside a library called at the top level) it is the innermost frame outside this
package.
"""

from __future__ import annotations

import linecache
import os
import sysconfig
import traceback

__all__ = ["exception_place", "exception_summary", "user_frame"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
#: Folders whose frames are a library's, not the user's: the standard library and the array libraries.
_LIBRARY_DIRS = tuple(os.path.abspath(p) for p in {sysconfig.get_paths()["stdlib"]} if p)
_LIBRARY_PACKAGES = ("numpy", "torch", "scipy", "triton")


def _is_library(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_LIBRARY_DIRS) and "site-packages" not in path:
        return True
    parts = path.split(os.sep)
    return any(p in parts for p in _LIBRARY_PACKAGES) and "site-packages" in parts


def _inside_package(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep)


def user_frame(exc: BaseException):
    """The innermost :class:`traceback.FrameSummary` of the user's code in ``exc``'s traceback, or None."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _inside_package(f.filename)]
    own = [f for f in frames if not _is_library(f.filename)]
    return (own or frames or [None])[-1]


def exception_place(exc: BaseException) -> str:
    """``"at bare.py:5 in _sample: raise RuntimeError"`` (the user's frame, :func:`user_frame`), or ""."""
    frame = user_frame(exc)
    if frame is None:
        return ""
    line = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
    return f"at {frame.filename}:{frame.lineno} in {frame.name}" + (f": {line}" if line else "")


def exception_summary(exc: BaseException) -> str:
    """``"RuntimeError (no message) at bare.py:5 in _sample: raise RuntimeError"``: what a finding says of an
    exception (the whole traceback goes in its evidence)."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else f"{type(exc).__name__} (no message)"
    place = exception_place(exc)
    return f"{text} {place}" if place else text
