"""Reading a ``report.json`` that may be hostile: regular files only, bounded size and nesting.

``specdec-check report FILE`` reads files it did not write. A FIFO would block ``open``
forever, ``/dev/zero`` would be read until memory runs out, a file of a million nested
brackets would exhaust the recursion of the JSON parser and of every renderer, and a
``NaN`` or a 10,000-digit integer is not a number any renderer can format. Each of these
is refused here with a one-line :class:`ValueError` (or :class:`OSError` when the file
cannot be opened), before anything is parsed or rendered.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

__all__ = ["MAX_REPORT_BYTES", "MAX_REPORT_DEPTH", "parse_report_bytes", "read_report_bytes", "report_path"]

#: Largest report.json read: the built-in batteries write 30 to 50 kB (quick mode), law
#: details are capped at 256 cells per test, so 64 MiB is over 1,000 times a real report
#: while its parse stays well under a gigabyte of memory.
MAX_REPORT_BYTES = 64 * 1024 * 1024

#: Deepest nesting of arrays and objects accepted: real reports nest 6 levels (report,
#: results, record, details, 2-D law); 32 leaves room for any evidence and keeps every
#: recursive renderer far below Python's recursion limit.
MAX_REPORT_DEPTH = 32

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder without a report.json",
}


def report_path(path) -> Path:
    """``path`` itself, or ``path / "report.json"`` when ``path`` is a folder."""
    path = Path(path)
    return path / "report.json" if path.is_dir() else path


def _not_regular(mode) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_report_bytes(path, *, limit: int = MAX_REPORT_BYTES) -> tuple[Path, bytes]:
    """``(file, bytes)`` of a report.json: a regular file of at most ``limit`` bytes.

    The file is opened non-blocking and checked with ``fstat`` on the open descriptor, so a
    FIFO or a device is refused without ever blocking or reading from it. Raises
    :class:`OSError` when it cannot be opened and :class:`ValueError` otherwise.
    """
    file = report_path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    before = os.stat(file)
    kind = _not_regular(before.st_mode)
    if kind is not None:  # refused before open(): opening a FIFO for reading may block
        raise ValueError(f"{file} is {kind}, not a report file")
    fd = os.open(file, flags)
    try:
        info = os.fstat(fd)
        kind = _not_regular(info.st_mode)
        if kind is not None:  # swapped for a FIFO or device between stat() and open()
            raise ValueError(f"{file} is {kind}, not a report file")
        if info.st_size > limit:
            raise ValueError(f"{file} is {info.st_size:,} bytes; a report is at most {limit:,} bytes")
        chunks, size = [], 0
        while size <= limit:  # st_size may lie (files under /proc say 0): read at most limit + 1 bytes
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise ValueError(f"{file} is larger than {limit:,} bytes; a report is at most {limit:,} bytes")
    return file, b"".join(chunks)


def _reject_constant(name):
    raise ValueError(f"{name} is not a number a report may hold")


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a double")
    return value


def _check_depth(data, limit: int) -> None:
    stack = [(data, 1)]
    while stack:  # iterative: linear in the number of nodes, no recursion
        node, depth = stack.pop()
        if depth > limit:
            raise ValueError(f"arrays and objects are nested more than {limit} levels deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))


def parse_report_bytes(raw: bytes, *, name="report", depth: int = MAX_REPORT_DEPTH):
    """Parse UTF-8 JSON with no ``NaN``/``Infinity``, no overflowing numbers, at most ``depth`` levels deep."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError(f"{name} is not a report: arrays and objects are nested more than {depth} levels deep") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not valid JSON: {exc}") from None
    except ValueError as exc:  # NaN, 1e999, an integer past Python's digit limit
        raise ValueError(f"{name} is not valid JSON: {' '.join(str(exc).split())}") from None
    try:
        _check_depth(data, depth)
    except ValueError as exc:
        raise ValueError(f"{name} is not a report: {exc}") from None
    return data
