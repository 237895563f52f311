"""Progress on a terminal: the checker's ``progress(done, total, label)`` as a tqdm bar on stderr."""

from __future__ import annotations

import os
import sys

__all__ = ["TqdmProgress", "make_progress"]


#: Columns and rows assumed on a terminal that reports a size of 0 x 0: tqdm hides a bar below the last
#: of 0 rows, so it would draw nothing at all there.
FALLBACK_SIZE = (100, 24)


def _size(stream) -> tuple:
    """The terminal's ``(columns, rows)``, 0 where it does not say."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return 0, 0
    return size.columns, size.lines


class TqdmProgress:
    """Adapter from the checker's ``progress(done, total, label)`` to a tqdm bar on stderr.

    The bar is created on the first call; tqdm's ``disable=None`` keeps it silent when
    stderr is not a terminal. Call :meth:`close` when the run ends.
    """

    def __init__(self, *, file=None, disable=None, desc: str = ""):
        self._file = file if file is not None else sys.stderr
        self._disable = disable
        self._desc = desc
        self._bar = None

    def __call__(self, done: int, total: int, label: str = "") -> None:
        from tqdm import tqdm

        if self._bar is None:
            width, height = _size(self._file)  # 0 x 0 on a pty that reports no size (under `script`, in CI)
            self._bar = tqdm(total=total, file=self._file, disable=self._disable, desc=self._desc, leave=False,
                             dynamic_ncols=bool(width), ncols=None if width else FALLBACK_SIZE[0],
                             nrows=None if height else FALLBACK_SIZE[1], unit="part")
        if total is not None and total != self._bar.total:
            self._bar.total = total
        if label:
            self._bar.set_postfix_str(str(label), refresh=False)
        if int(done) > self._bar.n:
            self._bar.update(int(done) - self._bar.n)
        elif label:  # a new label (the supervisor's calls count) and the elapsed time, shown now
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def make_progress(enabled: bool = True, *, desc: str = ""):
    """A :class:`TqdmProgress`, or ``None`` when disabled, tqdm is missing or stderr is not a terminal."""
    if not enabled:
        return None
    isatty = getattr(sys.stderr, "isatty", None)
    if not (isatty and isatty()):
        return None
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return None
    return TqdmProgress(desc=desc)
