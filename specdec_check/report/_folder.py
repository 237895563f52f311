"""Report folders: what one may hold, whose run it holds, and whether a run may write there.

A report folder holds one report set (``report.json``, ``report.md``, ``report.html``) and
the run stamp ``.specdec-run.json`` naming the run that wrote it (:class:`RunIdentity`).
:func:`prepare_report_dir` answers, before a run starts, whether the run could write its
report there: the path must be (or be creatable as) a writable folder, and the folder must
not hold the report of another run unless ``force``. The same checks run again when the
report is written (:mod:`._commit`), under the folder's lock.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ._identity import RunIdentity

__all__ = ["REPORT_FILES", "STAMP", "FolderState", "ReportConflictError", "ReportDirError", "inspect_folder",
           "prepare_report_dir", "real_target"]

#: The report files of a set, in the order they are listed.
REPORT_FILES = ("report.json", "report.md", "report.html")

#: The run stamp written beside the report files: which run the set belongs to.
STAMP = ".specdec-run.json"

#: Largest run stamp read (a real one is under 1 kB; a sampler path may be long).
_STAMP_LIMIT = 1 << 20

_FILE_KINDS = {
    stat.S_IFREG: "a file",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


class ReportDirError(ValueError):
    """A report folder that cannot be used: a file, under a file, not writable, or busy."""


class ReportConflictError(ReportDirError):
    """The folder holds the report of another run and ``force`` was not given."""


def _kind(mode) -> str:
    return _FILE_KINDS.get(stat.S_IFMT(mode), "not a folder")


def _is_junk(name: str) -> bool:
    """Leftovers of an interrupted single-file write (``.report.json.XXXX.tmp``)."""
    return name.startswith(".report.") and name.endswith(".tmp")


def real_target(path) -> Path:
    """The absolute path of ``path`` with symbolic links resolved (the folder that is really written)."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _check_location(shown, target: Path) -> bool:
    """Raise :class:`ReportDirError` unless ``target`` is a folder or can become one; return whether it exists."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        info = None  # a component is a file: found below
    except OSError as exc:
        raise ReportDirError(f"{shown}: {exc.strerror or exc}") from None
    if info is not None:
        if not stat.S_ISDIR(info.st_mode):
            raise ReportDirError(f"{shown} is {_kind(info.st_mode)}, not a folder; choose a folder for the report")
        return True
    for ancestor in target.parents:
        try:
            info = os.stat(ancestor)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise ReportDirError(f"{shown}: {ancestor}: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise ReportDirError(f"{shown} is under {ancestor}, which is {_kind(info.st_mode)}, not a folder")
        return False
    return False


def _read_stamp(folder: Path) -> RunIdentity | None:
    try:
        fd = os.open(folder / STAMP, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, _STAMP_LIMIT)
    finally:
        os.close(fd)
    try:
        return RunIdentity.from_dict(json.loads(raw.decode("utf-8")).get("run"))
    except (ValueError, AttributeError, RecursionError):
        return None


def _identity_of_json(folder: Path) -> RunIdentity | None:
    from ._load import parse_report_bytes, read_report_bytes

    try:
        _, raw = read_report_bytes(folder / REPORT_FILES[0])
        return RunIdentity.from_report(parse_report_bytes(raw))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class FolderState:
    """What a report folder holds now.

    ``kind`` is ``"absent"``, ``"owned"`` (empty, or only a report set: it may be replaced
    as a whole) or ``"shared"`` (it also holds other files: only the report files are
    replaced, one by one). ``identity`` is the run of the report it holds (from the stamp,
    else from ``report.json``), ``None`` when unknown; ``has_report`` says whether any
    report file is there.
    """

    kind: str
    entries: tuple
    identity: RunIdentity | None
    has_report: bool

    def conflict(self, identity: RunIdentity | None) -> str | None:
        """Why a run of ``identity`` may not replace this folder's report without ``force``, or ``None``."""
        if not self.has_report or identity is None:
            return None
        if self.identity is None:
            return "holds report files of an unknown run"
        if self.identity != identity:
            return f"holds the report of another run ({self.identity.describe()}); this run is {identity.describe()}"
        return None


def inspect_folder(target: Path) -> FolderState:
    """The :class:`FolderState` of the existing or absent folder ``target`` (an absolute, resolved path)."""
    try:
        entries = tuple(sorted(os.listdir(target)))
    except FileNotFoundError:
        return FolderState("absent", (), None, False)
    own = set(REPORT_FILES) | {STAMP}
    foreign = [e for e in entries if e not in own and not _is_junk(e)]
    has_report = any(e in REPORT_FILES for e in entries)
    identity = _read_stamp(target) if STAMP in entries else None
    if identity is None and REPORT_FILES[0] in entries:
        identity = _identity_of_json(target)
    return FolderState("shared" if foreign else "owned", entries, identity, has_report)


def _probe_writable(shown, folder: Path) -> None:
    """Create and remove a temporary folder in ``folder``: the only test that root and read-only mounts answer truly."""
    try:
        probe = tempfile.mkdtemp(dir=folder, prefix=".specdec-probe-")
        os.rmdir(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            reason = f"{reason} (not writable)"
        where = "" if str(folder) == str(shown) else f" {folder}"
        raise ReportDirError(f"{shown}: cannot write into{where or ' it'}: {reason}") from None


def prepare_report_dir(path, *, force: bool = False, run_identity: RunIdentity | None = None) -> Path:
    """Check, before a run, that its report can be written to folder ``path``; return ``Path(path)``.

    Raises :class:`ReportDirError` when ``path`` is a file (or a FIFO, a device...), lies
    under a file, or cannot be written, and :class:`ReportConflictError` when the folder
    holds the report of a run other than ``run_identity`` and ``force`` is false. Nothing is
    created: a folder that does not exist yet is made when the report is written.
    """
    shown = Path(path)
    target = real_target(path)
    if not _check_location(shown, target):
        ancestor = next(a for a in target.parents if a.is_dir())
        _probe_writable(shown, ancestor)
        return shown
    state = inspect_folder(target)
    reason = None if force else state.conflict(run_identity)
    if reason is not None:
        raise ReportConflictError(f"{shown} {reason}; pass --force (force=True) to replace it, or choose "
                                  "another folder")
    _probe_writable(shown, target)
    return shown
