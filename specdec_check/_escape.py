"""Strings from a report made safe to show: control characters become visible escapes.

Names and messages in a report come from the user's code (scenario names, sampler
paths, exception text) or from a hand-edited ``report.json``. Printed raw, an ANSI or
OSC sequence (``"\\x1b[2J"`` clears the terminal, ``"\\x1b]52;c;...\\x07"`` writes the
clipboard), a carriage return (overwrites the line: ``"ok\\rFAILED"``) or a bidi override
(reorders what follows) changes what the reader sees. Every renderer passes such strings
through :func:`printable`, which turns each of them into a visible ``\\xNN`` / ``\\uNNNN``
escape, in time linear in the length of the string.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["clip", "escaped", "one_line", "printable"]

#: Characters that can never need escaping (printable ASCII, tab, newline): the fast path.
_PLAIN = re.compile(r"[^\t\n -~]")

#: Names for the escapes a reader knows; every other character gets its code point.
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x00": "\\0"}


def _escape_char(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _visible(match: re.Match) -> str:
    ch = match.group(0)
    # Letters, marks, symbols and ordinary spaces (Zs) of any script are shown as they are;
    # controls (Cc), format characters such as bidi overrides (Cf), surrogates (Cs),
    # private-use and unassigned code points, and line/paragraph separators are escaped.
    if ch.isprintable() or unicodedata.category(ch) == "Zs":
        return ch
    return _escape_char(ch)


def printable(value) -> str:
    """``str(value)`` with every control, format or separator character escaped (tab and newline kept).

    ``"\\x1b[2J"`` becomes the six visible characters ``\\x1b[2J``; ``"ok\\rFAILED"`` becomes
    ``ok\\rFAILED`` on one line. A lone surrogate (which JSON allows and UTF-8 cannot encode)
    becomes ``\\udXXX``, so rendering never fails on it.
    """
    text = str(value)
    if _PLAIN.search(text) is None:
        return text
    return _PLAIN.sub(_visible, text)


def escaped(value) -> str:
    """:func:`printable` with tab and newline escaped too: one line, every character kept (paths in messages)."""
    return printable(value).replace("\t", "\\t").replace("\n", "\\n")


def one_line(value) -> str:
    """:func:`printable`, with runs of whitespace (tabs and newlines included) collapsed to one space."""
    return " ".join(printable(value).split())


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most about ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    keep = max(1, limit - 24)
    return f"{text[:keep]}… (+{len(text) - keep:,} characters)"
