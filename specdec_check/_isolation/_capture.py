"""The code under test's own stdout and stderr, kept out of the verdict output.

The check's child process points its file descriptors 1 and 2 (so C extensions' writes too) at a file the
supervisor made; after the run, whatever happened to the child, the supervisor reads a bounded excerpt of
it into the report (``sampler_output``), so a sampler's spam (or a fake ``verdict: PASSED`` line) never
mixes with the verdict, and nothing it wrote is silently dropped: its size is always reported.
"""

from __future__ import annotations

import os
import sys
import tempfile

__all__ = ["EXCERPT_CHARS", "OutputFile", "redirect_output_to"]

#: Characters of the sampler's output kept in a report: the first and the last half of this many.
EXCERPT_CHARS = 4000


def redirect_output_to(path: str) -> None:
    """In the child: send file descriptors 1 and 2 (and Python's ``sys.stdout`` / ``sys.stderr``) to ``path``."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


class OutputFile:
    """The supervisor's side: a temporary file for the child's output, its excerpt, and its removal."""

    def __init__(self):
        handle, self.path = tempfile.mkstemp(prefix="specdec-check-sampler-output-", suffix=".txt")
        os.close(handle)

    def excerpt(self) -> dict | None:
        """``{"bytes": n, "excerpt": text, "truncated": bool}`` of what the child wrote, or None when nothing."""
        try:
            size = os.path.getsize(self.path)
            if not size:
                return None
            with open(self.path, "rb") as f:
                if size <= EXCERPT_CHARS:
                    text = f.read().decode("utf-8", "replace")
                else:
                    head = f.read(EXCERPT_CHARS // 2).decode("utf-8", "replace")
                    f.seek(size - EXCERPT_CHARS // 2)
                    tail = f.read().decode("utf-8", "replace")
                    text = f"{head}\n... ({size - EXCERPT_CHARS:,} bytes left out) ...\n{tail}"
        except OSError:
            return None
        return {"bytes": int(size), "excerpt": text, "truncated": size > EXCERPT_CHARS}

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
